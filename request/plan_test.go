package request

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// planConfig has two pools on dc (one drained), a default pool on edge
// that namespace payments may not use, and one on pay for payments only.
const planConfig = `clusterName: prod
region: fr-par
clusterPrivateNetworkID: 11111111-1111-4111-8111-111111111111
pools:
  - {name: dc-link, privateNetworkID: 22222222-2222-4222-8222-222222222222, subnet: 172.16.32.0/22, ranges: ["172.16.35.200-172.16.35.250"]}
  - {name: dc-old, privateNetworkID: 22222222-2222-4222-8222-222222222222, subnet: 172.16.32.0/22, ranges: ["172.16.34.0/24"], disabled: true}
  - {name: general, privateNetworkID: 33333333-3333-4333-8333-333333333333, subnet: 10.10.0.0/16, default: true, namespaces: ["web"]}
  - {name: pay, privateNetworkID: 44444444-4444-4444-8444-444444444444, subnet: 10.20.0.0/24, namespaces: ["payments"]}
`

// TestNewPlan: what each request plans, read as the pools and addresses
// the allocator is asked for (or the IDs to validate), or the denial.
func TestNewPlan(t *testing.T) {
	cfg, err := ipam.ParseConfig([]byte(planConfig))
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr
	for _, tt := range []struct {
		name string
		ns   string
		ask  Ask
		want string // the plan as plan(); "nil" for none; "error: …" for a denial, which contains …
	}{
		{"nothing asked, default pool allowed", "web", Ask{}, "general"},
		{"nothing asked, default pool not for the namespace", "payments", Ask{}, "nil"},
		{"a pool", "payments", Ask{Pools: []string{"pay"}}, "pay"},
		{"two pools on distinct networks", "payments", Ask{Pools: []string{"dc-link", "pay"}}, "dc-link,pay"},
		{"an address infers its pool", "payments", Ask{Addresses: []netip.Addr{addr("10.20.0.7")}}, "pay=10.20.0.7"},
		{"an address goes to the named pool holding it, the others after", "payments",
			Ask{Pools: []string{"dc-link", "pay"}, Addresses: []netip.Addr{addr("10.20.0.7")}}, "pay=10.20.0.7,dc-link"},
		{"bring-your-own IDs", "payments", Ask{IDs: []string{"id-1"}}, "ids(" + AnnotationIPAMIDs + ")=id-1"},
		{"a restored manifest: raw IDs with their recorded addresses", "payments",
			Ask{RawIDs: []string{"id-1", "id-2"}, Recorded: []netip.Addr{addr("172.16.35.210"), addr("172.16.34.9")}},
			"ids(service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids)=id-1,id-2 fallbacks=dc-link,-"},
		{"an unknown pool names the allowed ones", "payments", Ask{Pools: []string{"nope"}},
			`error: there is no pool "nope"; pools namespace payments may use: dc-link, dc-old, pay`},
		{"a pool not allowed", "payments", Ask{Pools: []string{"general"}},
			`error: pool "general" is not allowed for namespace payments; pools it may use: dc-link, dc-old, pay`},
		{"two pools on one network", "payments", Ask{Pools: []string{"dc-link", "dc-old"}},
			`error: pools "dc-link" and "dc-old" are on the same Private Network 22222222-2222-4222-8222-222222222222`},
		{"an address in no pool", "payments", Ask{Addresses: []netip.Addr{addr("192.168.1.1")}},
			"error: 192.168.1.1 is in none of the pools namespace payments may use (dc-link, dc-old, pay)"},
		{"externally managed", "payments", Ask{Pools: []string{"pay"}, ExternallyManaged: true}, "error: the Service uses an externally managed Load Balancer"},
		{"externally managed, asking nothing", "payments", Ask{ExternallyManaged: true}, "nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(cfg, tt.ns, tt.ask)
			got := plan(p)
			if err != nil {
				got = "error: " + err.Error()
			}
			if denial, ok := strings.CutPrefix(tt.want, "error: "); ok && (err == nil || !strings.Contains(got, denial)) || !ok && got != tt.want {
				t.Fatalf("NewPlan = %q, want %q", got, tt.want)
			}
		})
	}
}

// plan renders a plan for the table: pool[=address] per request, or the
// IDs with the annotation they came from and each one's fallback pool.
func plan(p *Plan) string {
	if p == nil {
		return "nil"
	}
	if len(p.IDs) > 0 {
		s := "ids(" + p.IDsFrom + ")=" + strings.Join(p.IDs, ",")
		if len(p.recorded) > 0 {
			var fb []string
			for i := range p.IDs {
				name := "-"
				if f := p.Fallback(i, &ipam.Error{Reason: ipam.ReasonIDNotFound}); f != nil {
					name = f.Name
				}
				fb = append(fb, name)
			}
			s += " fallbacks=" + strings.Join(fb, ",")
		}
		return s
	}
	var rs []string
	for _, r := range p.Reserve {
		s := r.Pool.Name
		if r.Address.IsValid() {
			s += "=" + r.Address.String()
		}
		rs = append(rs, s)
	}
	return strings.Join(rs, ",")
}

// TestFallback: only a restored manifest's gone or releasing reservation
// is replaced by a fresh address, never a brought-your-own ID.
func TestFallback(t *testing.T) {
	pool := &ipam.Pool{Name: "dc-link"}
	releasing := &ipam.Error{Reason: ipam.ReasonReleasing, Fallback: pool}
	for _, tt := range []struct {
		name string
		p    *Plan
		err  error
		want *ipam.Pool
	}{
		{"restored, releasing", &Plan{IDsFrom: "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids"}, releasing, pool},
		{"restored, gone, recorded", &Plan{IDsFrom: "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids", recorded: []*ipam.Pool{pool}}, &ipam.Error{Reason: ipam.ReasonIDNotFound}, pool},
		{"restored, another refusal", &Plan{IDsFrom: "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids"}, &ipam.Error{Reason: ipam.ReasonIDNotUsable}, nil},
		{"brought your own, releasing", &Plan{IDsFrom: AnnotationIPAMIDs}, releasing, nil},
		{"not a refusal", &Plan{IDsFrom: "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids"}, errors.New("boom"), nil},
		{"no error", &Plan{IDsFrom: "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids"}, nil, nil},
	} {
		if got := tt.p.Fallback(0, tt.err); got != tt.want {
			t.Errorf("%s: Fallback = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestCheckNetworks: the pn-ids a plan's reservations would make, the
// user's networks (or the nodes') then the pools', holds at most 8; IDs are
// checked once validated (CheckReserved), as their networks are unknown
// before.
func TestCheckNetworks(t *testing.T) {
	cfg, err := ipam.ParseConfig([]byte(planConfig))
	if err != nil {
		t.Fatal(err)
	}
	// eight is a pn-ids of 8 networks, none a pool's.
	eight := []string{"11111111-1111-4111-8111-111111111111"}
	for i := 1; i <= 7; i++ {
		eight = append(eight, fmt.Sprintf("5555555%d-5555-4555-8555-555555555555", i))
	}
	for _, tt := range []struct {
		name string
		ask  Ask
		want string // "" when it holds, else the start of the denial
	}{
		{"a pn-ids of 8 and a pool on a ninth network", Ask{Pools: []string{"pay"}, PNIDs: eight},
			"service.beta.kubernetes.io/scw-loadbalancer-pn-ids would list 9 Private Networks (the networks service.beta.kubernetes.io/scw-loadbalancer-pn-ids lists, then those of pools pay: " + strings.Join(eight, ",") + ",44444444-4444-4444-8444-444444444444), and a Scaleway Load Balancer attaches at most 8"},
		{"a pn-ids of 8 already naming the pool's network", Ask{Pools: []string{"pay"}, PNIDs: append(eight[:7:7], "44444444-4444-4444-8444-444444444444")}, ""},
		{"two pools and the nodes' network", Ask{Pools: []string{"dc-link", "pay"}}, ""},
		{"a pn-ids of 8 and IDs: checked once validated", Ask{IDs: []string{"id-1"}, PNIDs: eight}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(cfg, "payments", tt.ask)
			if err != nil {
				t.Fatalf("NewPlan = %v", err)
			}
			err = p.CheckNetworks(cfg, tt.ask)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckNetworks = %q, want nil", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("CheckNetworks = %v, want %q…", err, tt.want)
			}
		})
	}
}
