package sweeper

import (
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// notNamedFor warns only a Service whose own Load Balancer, by the ID its
// annotation names (any case), holds the IP and is named for another UID.
func TestNotNamedFor(t *testing.T) {
	own := liveRef{uid: "u-2", loadBalancerID: "lb-1"}
	for _, tc := range []struct {
		name string
		lb   *scaleway.Resource
		ref  liveRef
		warn bool
	}{
		{"named for the Service", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "k8s-u-2"}, own, false},
		{"named for an earlier UID", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "k8s-u-1"}, own, true},
		{"the ID in another case", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "LB-1", Name: "k8s-u-1"}, own, true},
		{"attached to another Load Balancer than its own", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-old", Name: "k8s-u-1"}, own, false},
		{"before the CCM wrote the ID", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "k8s-u-1"}, liveRef{uid: "u-2"}, false},
		{"a name IPAM does not give", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1"}, own, false},
		{"not a Load Balancer", &scaleway.Resource{Type: "instance_server", ID: "lb-1", Name: "vm"}, own, false},
		{"externally managed", &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "mine"}, liveRef{uid: "u-2", loadBalancerID: "lb-1", externallyManaged: true}, false},
		{"detached", nil, own, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(notNamedFor(tc.lb, []liveRef{tc.ref})) == 1; got != tc.warn {
				t.Fatalf("warned %v, want %v", got, tc.warn)
			}
		})
	}
}
