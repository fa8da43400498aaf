//go:build tools

// Package tools records the Envoy Gateway command `make tools` builds, so
// that go.mod and go.sum keep its dependencies. Nothing imports it.
package tools

import (
	_ "github.com/envoyproxy/gateway/cmd/envoy-gateway" // bin/envoy-gateway
)
