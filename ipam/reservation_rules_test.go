package ipam

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// TestRead: a reservation is read once, its ledger whole (the tags it does
// not know kept), and named for users by what holds it.
func TestRead(t *testing.T) {
	lb := &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "my-lb"}
	e := retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}, time.Hour, time.Hour)
	ours := ledgerIP("ip-1", subA, "172.16.4.11", e)
	ours.Tags = append(ours.Tags, "team=payments")
	attached := ledgerIP("ip-2", subA, "172.16.4.12", Entry{Cluster: "prod", Pool: "dc", Service: svcAPI})
	attached.Resource = lb
	foreign := &scaleway.IP{ID: "ip-3", SubnetID: subA, Address: netip.MustParseAddr("172.16.4.13"), Tags: []string{"terraform"}}
	for _, tc := range []struct {
		name   string
		ip     *scaleway.IP
		ours   bool
		want   Entry
		string string
	}{
		{"ours, retained", ours, true, Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, Namespace: svcAPI.Namespace, UID: "u1",
			OrphanedSince: e.OrphanedSince, ReleaseAt: e.ReleaseAt, Other: []string{"team=payments"}}, "Service payments/api (cluster prod)"},
		{"ours, attached: named by its resource", attached, true, Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, Namespace: svcAPI.Namespace}, lb.String()},
		{"someone else's: no ledger, its ID alone", foreign, false, Entry{}, "IPAM IP ip-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Read(tc.ip, rulesNow)
			if got.Ours() != tc.ours || !reflect.DeepEqual(got.Entry, tc.want) || !reflect.DeepEqual(got.IP, *tc.ip) || !got.ReadAt.Equal(rulesNow) {
				t.Errorf("Read = %+v (ours %v), want %+v (ours %v)", got.Entry, got.Ours(), tc.want, tc.ours)
			}
			if got.String() != tc.string {
				t.Errorf("names %q, want %q", got.String(), tc.string)
			}
			if all := ReadAll([]*scaleway.IP{tc.ip}, rulesNow); len(all) != 1 || !reflect.DeepEqual(all[0], got) {
				t.Errorf("ReadAll = %+v, want %+v", all, got)
			}
		})
	}
	if got := (&Reservation{}).String(); got != "another reservation" {
		t.Errorf("a booking in flight names %q", got)
	}
	var unknown *Reservation
	if got := unknown.String(); got != "another reservation" {
		t.Errorf("a holder the view does not know names %q", got)
	}
}

// TestReadEntryIsTheLedgers: what a listing keeps of the ledger is what the
// release protocol decides from, and writing it back gives the same tags.
func TestReadEntryIsTheLedgers(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	e := retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}, time.Hour, 10*time.Second)
	ip := ledgerIP("ip-1", subA, "172.16.4.11", e)
	h := Read(ip, rulesNow).Entry
	if !h.OrphanedSince.Equal(e.OrphanedSince) || !h.ReleaseAt.Equal(e.ReleaseAt) || h.UID != "u1" {
		t.Fatalf("Entry = %+v", h)
	}
	if rulesPolicy.Releasing(dc, h, rulesNow) != rulesPolicy.Releasing(dc, e, rulesNow) || !rulesPolicy.Releasing(dc, h, rulesNow) {
		t.Error("the read entry is judged otherwise than the ledger's")
	}
	if !SameTags(h.Tags(), ip.Tags) {
		t.Errorf("written back: %v, read from %v", h.Tags(), ip.Tags)
	}
}
