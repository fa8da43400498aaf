//go:build tools

// Package tools records the staticcheck command `make lint` builds, so that
// go.mod and go.sum keep its dependencies. Nothing imports it.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck" // bin/staticcheck
)
