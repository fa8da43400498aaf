//go:build tools

// Package tools records the external-dns command `make tools` builds, so
// that go.mod and go.sum keep its dependencies. Nothing imports it.
package tools

import (
	_ "sigs.k8s.io/external-dns" // bin/external-dns
)
