package ipam

import (
	"net/netip"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

func TestHolderOf(t *testing.T) {
	lb := &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "my-lb"}
	e := retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}, time.Hour, time.Hour)
	ours := ledgerIP("ip-1", subA, "172.16.4.11", e)
	attached := ledgerIP("ip-2", subA, "172.16.4.12", Entry{Cluster: "prod", Pool: "dc", Service: svcAPI})
	attached.Resource = lb
	foreign := &scaleway.IP{ID: "ip-3", SubnetID: subA, Address: netip.MustParseAddr("172.16.4.13"), Tags: []string{"terraform"}}
	for _, tc := range []struct {
		name   string
		ip     *scaleway.IP
		want   Holder
		string string
	}{
		{"ours, retained", ours, Holder{IPID: "ip-1", Entry: Entry{Cluster: "prod", Service: svcAPI, UID: "u1", OrphanedSince: e.OrphanedSince, ReleaseAt: e.ReleaseAt}}, "Service payments/api (cluster prod)"},
		{"ours, attached: named by its resource", attached, Holder{IPID: "ip-2", Resource: lb, Entry: Entry{Cluster: "prod", Service: svcAPI}}, lb.String()},
		{"someone else's: its ID alone", foreign, Holder{IPID: "ip-3"}, "IPAM IP ip-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := ParseEntry(tc.ip.Tags)
			for via, h := range map[string]Holder{"HolderOf": HolderOf(tc.ip), "HolderFrom": HolderFrom(tc.ip, e, ok)} {
				if h.IPID != tc.want.IPID || h.Cluster != tc.want.Cluster || h.Service != tc.want.Service || h.Resource != tc.want.Resource || h.UID != tc.want.UID ||
					!h.OrphanedSince.Equal(tc.want.OrphanedSince) || !h.ReleaseAt.Equal(tc.want.ReleaseAt) {
					t.Errorf("%s = %+v, want %+v", via, h, tc.want)
				}
				if h.String() != tc.string {
					t.Errorf("%s names %q, want %q", via, h.String(), tc.string)
				}
			}
		})
	}
	if got := (Holder{}).String(); got != "another reservation" {
		t.Errorf("an empty holder names %q", got)
	}
}

// TestHolderEntry: what a listing keeps of the ledger is what the release
// protocol decides from.
func TestHolderEntry(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	e := retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}, time.Hour, 10*time.Second)
	h := HolderOf(ledgerIP("ip-1", subA, "172.16.4.11", e)).Entry
	if !h.OrphanedSince.Equal(e.OrphanedSince) || !h.ReleaseAt.Equal(e.ReleaseAt) || h.UID != "u1" {
		t.Fatalf("Entry = %+v", h)
	}
	if rulesPolicy.Releasing(dc, h, rulesNow) != rulesPolicy.Releasing(dc, e, rulesNow) || !rulesPolicy.Releasing(dc, h, rulesNow) {
		t.Error("the holder's entry is judged otherwise than the ledger's")
	}
}
