//go:build tools

// Package tools records CNCF Distribution's registry, which `make tools`
// builds into bin/registry for the e2e suite's OCI registry (the chart and
// the image published as the release workflow publishes them). Nothing
// imports it.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry" // bin/registry
)
