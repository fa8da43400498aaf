//go:build tools

// Package tools records the helm command `make tools` builds, so that go.mod
// and go.sum keep its dependencies. Nothing imports it.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm" // bin/helm
)
