//go:build tools

// Package tools records the goimports command `make lint` builds, so that
// go.mod and go.sum keep its dependencies. Nothing imports it.
package tools

import (
	_ "golang.org/x/tools/cmd/goimports" // bin/goimports
)
