package request

import (
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestOneIPPerNetwork: the rule is checked on validated IDs, with the IDs
// named, and left to the plan for pools (their networks are known before
// booking).
func TestOneIPPerNetwork(t *testing.T) {
	cfg := &ipam.Config{ClusterPrivateNetworkID: "nodes"}
	a := &ipam.Reservation{ID: "id-a", PrivateNetworkID: "dc"}
	b := &ipam.Reservation{ID: "id-b", PrivateNetworkID: "edge"}
	c := &ipam.Reservation{ID: "id-c", PrivateNetworkID: "dc"}
	for name, tt := range map[string]struct {
		plan *Plan
		rs   []*ipam.Reservation
		want string
	}{
		"IDs on distinct networks":   {&Plan{IDs: []string{"id-a", "id-b"}}, []*ipam.Reservation{a, b}, ""},
		"IDs sharing a network":      {&Plan{IDs: []string{"id-a", "id-b", "id-c"}}, []*ipam.Reservation{a, b, c}, "IPAM IDs id-a and id-c are both on Private Network dc, and a Load Balancer takes one IP per Private Network; keep one"},
		"pools: checked by the plan": {&Plan{Reserve: []ipam.Request{{}, {}}}, []*ipam.Reservation{a, c}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckReserved(cfg, Ask{}, tt.plan, tt.rs)
			if got := ""; err != nil {
				got = err.Error()
				if got != tt.want {
					t.Fatalf("CheckReserved = %q, want %q", got, tt.want)
				}
			} else if tt.want != "" {
				t.Fatalf("CheckReserved = nil, want %q", tt.want)
			}
		})
	}
	if i, j, ok := sharedNetwork(strings.Split("a,b,c,b,a", ",")); !ok || i != 1 || j != 3 {
		t.Fatalf("sharedNetwork = %d %d %v, want the first pair found going right: 1 3", i, j, ok)
	}
}
