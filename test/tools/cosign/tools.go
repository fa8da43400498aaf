//go:build tools

// Package tools records Sigstore's cosign, which `make tools` builds into
// bin/cosign for the e2e suite: it signs the image and the chart in the
// suite's OCI registry with a throwaway key and verifies them, as a user
// verifies what the release workflow signed. Nothing imports it.
package tools

import (
	_ "github.com/sigstore/cosign/v3/cmd/cosign" // bin/cosign
)
