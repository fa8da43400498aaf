//go:build tools

// Package neighbours records the programs built from this module (make
// tools, make e2e), so that go.mod and go.sum keep their dependencies.
// Nothing imports it.
package neighbours

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"                                        // bin/registry (make e2e)
	_ "github.com/envoyproxy/gateway/cmd/envoy-gateway"                                             // bin/envoy-gateway
	_ "github.com/scaleway/scaleway-cloud-controller-manager/cmd/scaleway-cloud-controller-manager" // bin/scaleway-cloud-controller-manager
	_ "github.com/sigstore/cosign/v3/cmd/cosign"                                                    // bin/cosign (make e2e)
	_ "sigs.k8s.io/external-dns"                                                                    // bin/external-dns
)
