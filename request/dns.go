package request

import (
	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// external-dns publishes every address of status.loadBalancer.ingress,
// and a Load Balancer on a pool's network besides the nodes' has two: the
// reserved one and a DHCP one that changes on every re-create. Its target
// annotation names what to publish instead: the reserved addresses.

// DNSTarget is the external-dns target annotation a Service with
// annotations ann gets when it holds addresses (comma-separated): under
// the prefix of its hostname annotation. ok is false when the pool file
// turns it off (dnsTarget: false), the Service asks external-dns for no
// name, or it carries a target of the user's: one that is not recorded,
// the addresses an earlier admission wrote (and so the target it wrote).
func DNSTarget(cfg *ipam.Config, ann map[string]string, recorded, addresses string) (key, value string, ok bool) {
	for _, p := range ccm.ExternalDNSPrefixes {
		if _, asks := ann[p+"hostname"]; !asks {
			continue
		}
		if addresses == "" || !cfg.WritesDNSTarget() {
			return "", "", false
		}
		key = p + "target"
		if v, set := ann[key]; set && (recorded == "" || !ccm.SameAddresses(v, recorded)) {
			return "", "", false
		}
		return key, addresses, true
	}
	return "", "", false
}
