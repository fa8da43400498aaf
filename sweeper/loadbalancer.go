package sweeper

import (
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// notNamedForNote is the note of EventReasonLoadBalancerNotNamedForService:
// the IPAM ID, its address, the Load Balancer's ID and name, the Service's
// UID.
const notNamedForNote = "IPAM IP %s (%s) is attached to Load Balancer %s (%s), which the CCM did not make for this Service (it names them after the Service's UID %s): " +
	"the CCM will not delete it with this Service, and the address stays attached to it, not released until that Load Balancer is deleted. " +
	"Unless the Service adopted it on purpose, see \"A Service given another Service's Load Balancer\" in docs/troubleshooting.md"

// notNamedFor are the Services among refs whose own Load Balancer (the one
// their scw-loadbalancer-id names) holds an IP attached to lb while the
// CCM did not make it for them (ccm.NamedFor): at their deletion the CCM
// will leave it ("was renamed, not removing") with the IP attached.
// Externally managed Load Balancers are named by their users; an IP still
// attached to a previous Load Balancer is the convergence monitor's
// (ReasonAttachedElsewhere).
func notNamedFor(lb *scaleway.Resource, refs []liveRef) []liveRef {
	if lb == nil || lb.Type != scaleway.ResourceLoadBalancer || lb.Name == "" {
		return nil
	}
	var out []liveRef
	for _, r := range refs {
		if r.uid != "" && r.loadBalancerID != "" && !r.externallyManaged && strings.EqualFold(lb.ID, r.loadBalancerID) && !ccm.NamedFor(lb.Name, r.uid) {
			out = append(out, r)
		}
	}
	return out
}
