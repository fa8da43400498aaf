//go:build tools

// Package tools records the actionlint command `make lint` builds, so that
// go.mod and go.sum keep its dependencies. Nothing imports it.
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint" // bin/actionlint
)
