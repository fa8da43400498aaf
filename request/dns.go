package request

import (
	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

// external-dns publishes every address of status.loadBalancer.ingress,
// and a private Load Balancer on a pool's network besides the nodes' has
// two there: the reserved one and a DHCP one that changes on every
// re-create. Its target annotation names what to publish instead: the
// reserved addresses. A public Load Balancer's status lists its public IPs
// only, which is what its name must keep resolving to: no target there.

// TargetEdit is what an admission does to external-dns's target annotation.
type TargetEdit struct {
	// Key is the target annotation, under the prefix of the Service's
	// hostname annotation.
	Key string
	// Value is the target to write; "" removes the target an earlier
	// admission wrote.
	Value string
}

// DNSTarget is the edit of external-dns's target annotation for a Service
// with annotations ann that holds addresses (comma-separated, "" for none);
// recorded are the addresses an earlier admission wrote, whose target is
// this project's to follow. ok is false when there is nothing to do: the
// Service asks external-dns for no name, or carries a target of the user's
// (one that does not name the recorded addresses).
//
// The target names the addresses where the CCM's status would list them
// (ccm.StatusListsPrivateIPs) and the pool file lets it (dnsTarget). Where
// it would not, a target naming the recorded addresses is removed: on a
// public Load Balancer it would move the public name to a private address,
// and after a move it would keep naming an address given up, which another
// Service may get.
func DNSTarget(cfg *ipam.Config, ann map[string]string, recorded, addresses string) (TargetEdit, bool) {
	for _, p := range neighbours.ExternalDNSPrefixes {
		if _, asks := ann[p+"hostname"]; !asks {
			continue
		}
		key := p + "target"
		current, set := ann[key]
		ours := set && recorded != "" && neighbours.SameAddresses(current, recorded)
		listed := ccm.StatusListsPrivateIPs(ccm.Of(ann))
		moved := !neighbours.SameAddresses(recorded, addresses)
		switch {
		case set && !ours:
			return TargetEdit{}, false
		case addresses != "" && cfg.WritesDNSTarget() && listed:
			return TargetEdit{Key: key, Value: addresses}, true
		case ours && (moved || !listed):
			// Given up, or on a Load Balancer whose status lists its
			// public IPs: the name must not point at it. A target naming
			// the addresses the Service keeps on a private Load Balancer
			// (dnsTarget turned off since) is left as it is: it may be
			// the user's.
			return TargetEdit{Key: key}, true
		}
		return TargetEdit{}, false
	}
	return TargetEdit{}, false
}
