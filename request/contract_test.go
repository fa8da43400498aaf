package request

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestOneIPPerNetwork: the rule is checked on validated IDs, with the IDs
// named, and left to the plan for pools (their networks are known before
// booking).
func TestOneIPPerNetwork(t *testing.T) {
	cfg := &ipam.Config{ClusterPrivateNetworkID: "nodes"}
	a := &ipam.Grant{ID: "id-a", PrivateNetworkID: "dc"}
	b := &ipam.Grant{ID: "id-b", PrivateNetworkID: "edge"}
	c := &ipam.Grant{ID: "id-c", PrivateNetworkID: "dc"}
	for name, tt := range map[string]struct {
		plan *Plan
		rs   []*ipam.Grant
		want string
	}{
		"IDs on distinct networks":   {&Plan{IDs: []string{"id-a", "id-b"}}, []*ipam.Grant{a, b}, ""},
		"IDs sharing a network":      {&Plan{IDs: []string{"id-a", "id-b", "id-c"}}, []*ipam.Grant{a, b, c}, "IPAM IDs id-a and id-c are both on Private Network dc, and a Load Balancer takes one IP per Private Network; keep one"},
		"pools: checked by the plan": {&Plan{Reserve: []ipam.Request{{}, {}}}, []*ipam.Grant{a, c}, ""},
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

// TestCheckReserved: each rule on what was reserved, on plans NewPlan makes
// from the pool file: validated IDs (brought-your-own or a restored
// manifest's) one per Private Network, then a pn-ids of at most 8 networks
// once the reserved IPs' networks are added, where a network pn-ids
// already lists counts once. Each denial names what to change.
func TestCheckReserved(t *testing.T) {
	cfg, err := ipam.ParseConfig([]byte(planConfig))
	if err != nil {
		t.Fatal(err)
	}
	const (
		nodes = "11111111-1111-4111-8111-111111111111"
		dc    = "22222222-2222-4222-8222-222222222222"
		pay   = "44444444-4444-4444-8444-444444444444"
	)
	// others are networks no pool is on, as a brought-your-own ID's may be.
	others := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("5555555%d-5555-4555-8555-555555555555", i))
		}
		return out
	}
	other := func(i int) string { return others(i, i)[0] }
	eight := append([]string{nodes}, others(1, 7)...) // a pn-ids of 8 networks, none a pool's
	for _, tt := range []struct {
		name string
		in   reserved
		deny []string // fragments of the denial; nil when CheckReserved holds
	}{
		{"IDs on distinct networks", byo(nil, dc, pay, other(1)), nil},
		{"IDs sharing a network", byo(nil, dc, pay, dc),
			[]string{"IPAM IDs id-1 and id-3 are both on Private Network " + dc, "a Load Balancer takes one IP per Private Network", "keep one"}},
		{"a restored manifest's IDs sharing a network", restoredIDs(other(1), other(1)),
			[]string{"IPAM IDs id-1 and id-2 are both on Private Network " + other(1)}},
		{"pools on distinct networks", inPools(nil, "dc-link", dc, "pay", pay), nil},
		{"the nodes' network and 7 reserved: 8", byo(nil, others(1, 7)...), nil},
		{"the nodes' network and 8 reserved: 9", byo(nil, others(1, 8)...), []string{
			ccm.AnnotationPNIDs + " would list 9 Private Networks", "(the nodes' network, then those of the reserved IPs: " + nodes + "," + other(1) + ",",
			"attaches at most 8", "list fewer networks in " + ccm.AnnotationPNIDs + ", or ask for fewer pools"}},
		{"a pn-ids of 8 already listing the reserved IP's network", byo(eight, other(3)), nil},
		{"a pn-ids of 8 and an ID on a ninth network", byo(eight, other(9)), []string{
			"would list 9 Private Networks", "(the networks " + ccm.AnnotationPNIDs + " lists, then those of the reserved IPs: " + strings.Join(eight, ",") + "," + other(9) + ")"}},
		{"IDs sharing a network beyond the limit: the sharing is told", byo(eight, dc, dc),
			[]string{"IPAM IDs id-1 and id-2 are both on Private Network " + dc}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(cfg, "payments", tt.in.ask)
			if err != nil || p == nil {
				t.Fatalf("NewPlan = %v, %v", p, err)
			}
			err = CheckReserved(cfg, tt.in.ask, p, tt.in.rs)
			switch {
			case tt.deny == nil && err != nil:
				t.Fatalf("CheckReserved = %q, want nil", err)
			case tt.deny != nil && err == nil:
				t.Fatalf("CheckReserved = nil, want a denial containing %q", tt.deny)
			}
			for _, want := range tt.deny {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("CheckReserved = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

// reserved is a request and what was reserved for it.
type reserved struct {
	ask Ask
	rs  []*ipam.Grant
}

// byo asks for brought-your-own IDs id-1, id-2... one on each of pns, with
// pn-ids pnIDs.
func byo(pnIDs []string, pns ...string) reserved {
	r := restoredIDs(pns...)
	r.ask = Ask{IDs: r.ask.RawIDs, PNIDs: pnIDs}
	return r
}

// restoredIDs is a restored manifest's private-ip-ids, id-1, id-2... one
// on each of pns.
func restoredIDs(pns ...string) reserved {
	var r reserved
	for i, pn := range pns {
		id := fmt.Sprintf("id-%d", i+1)
		r.ask.RawIDs = append(r.ask.RawIDs, id)
		r.rs = append(r.rs, &ipam.Grant{ID: id, PrivateNetworkID: pn})
	}
	return r
}

// inPools asks for pools, given as name then network, with pn-ids pnIDs:
// one IP booked in each.
func inPools(pnIDs []string, poolThenPN ...string) reserved {
	r := reserved{ask: Ask{PNIDs: pnIDs}}
	for i := 0; i < len(poolThenPN); i += 2 {
		name, pn := poolThenPN[i], poolThenPN[i+1]
		r.ask.Pools = append(r.ask.Pools, name)
		r.rs = append(r.rs, &ipam.Grant{ID: "id-" + name, Pool: name, PrivateNetworkID: pn, Booked: true})
	}
	return r
}

// portsService is a LoadBalancer Service with ports 443 and 80.
func portsService(ann map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "api", Annotations: ann},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}, {Port: 80}}},
	}
}

func TestPrivateNetworkID(t *testing.T) {
	for in, want := range map[string]string{"fr-par-1/abc": "abc", "abc": "abc"} {
		if got := PrivateNetworkID(in); got != want {
			t.Errorf("PrivateNetworkID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProxyProtocolGap(t *testing.T) {
	const v2 = "service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2"
	key, value, missing, ok := ProxyProtocolGap(portsService(map[string]string{v2: "443"}))
	if !ok || key != v2 || value != "443" || !slices.Equal(missing, []string{"80"}) {
		t.Fatalf("gap = %q %q %q %v", key, value, missing, ok)
	}
	for _, v := range []string{"*", "true", "false", "", "443,80", "nope"} {
		if _, _, _, ok := ProxyProtocolGap(portsService(map[string]string{v2: v})); ok {
			t.Errorf("%q: reported a gap", v)
		}
	}
}

// PNList is pn-ids for a CREATE and an UPDATE alike: the user's items, or
// the fallback, then each added network no item names yet, a zone in front
// of either side or not.
func TestPNList(t *testing.T) {
	const nodes, dc = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	for _, tc := range []struct {
		name                  string
		user, fallback, added []string
		want                  []string
	}{
		{"a CREATE: the nodes' network, then the pool's", nil, []string{nodes}, []string{dc}, []string{nodes, dc}},
		{"the user's networks replace the fallback", []string{dc}, []string{nodes}, []string{dc}, []string{dc}},
		{"an UPDATE: what was written, the pool's not twice", nil, []string{nodes, dc}, []string{dc}, []string{nodes, dc}},
		{"a zonal item written before: not added again, plain or zonal", nil, []string{"fr-par-1/" + dc}, []string{"fr-par-1/" + dc, dc}, []string{"fr-par-1/" + dc}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PNList(tc.user, tc.fallback, tc.added); !slices.Equal(got, tc.want) {
				t.Fatalf("PNList = %q, want %q", got, tc.want)
			}
		})
	}
}
