package inventory

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// A listing that started before this replica's own write does not drop it;
// one that started after decides.
func TestRebuiltKeepsWritesAfterTheListingStarted(t *testing.T) {
	now := time.Now()
	x := newIndex()
	x.put(&ipam.Reservation{IP: scaleway.IP{ID: "ip-1", Address: netip.MustParseAddr("10.0.0.1")},
		Entry: ipam.Entry{Pool: "small", Service: types.NamespacedName{Namespace: "web", Name: "api"}}, ReadAt: now})
	if y := x.rebuilt(nil, now.Add(-time.Second)); y.byID["ip-1"] == nil || len(y.of(types.NamespacedName{Namespace: "web", Name: "api"})) != 1 {
		t.Fatal("a listing that started before the booking dropped it")
	}
	if y := x.rebuilt(nil, now.Add(time.Second)); y.byID["ip-1"] != nil || len(y.byService) != 0 {
		t.Fatal("a listing that started after the booking and did not show it kept it")
	}
	x.drop("ip-1")
	if len(x.byID) != 0 || len(x.byService) != 0 {
		t.Fatal("dropped reservation still indexed")
	}
}

// What the view and the index keep of one of this cluster's reservations is
// the reservation as listed, ledger whole: rebuilt from the index (a
// booking of this replica's the listing did not show yet), it equals the
// listed one.
func TestIndexKeepsTheListedReservation(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	svc := types.NamespacedName{Namespace: "web", Name: "api"}
	e := ipam.Entry{Cluster: "prod", Pool: "small", Service: svc, Namespace: "gateways", UID: "u1",
		OrphanedSince: now.Add(-time.Minute), ReleaseAt: now.Add(time.Hour), Early: true}
	ip := &scaleway.IP{ID: "ip-1", SubnetID: "sub", Address: netip.MustParseAddr("10.0.0.1"), Tags: append(e.Tags(), "team=web"),
		Resource: &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1"}}
	listed := ipam.Read(ip, now)
	if listed.Other == nil {
		t.Fatal("the ledger read lost a tag it does not know")
	}
	o := &occupancy{subnet: "sub", holders: map[netip.Addr]*ipam.Reservation{}, spaces: map[string]*addrspace.Space{}, mine: newIndex(), inflight: map[netip.Addr]int{}}
	// Loaded from a read of its own: the view and the index keep what a
	// listing read, not a copy rebuilt from less.
	o.load([]*ipam.Reservation{ipam.Read(ip, now)}, "prod", now)
	if got := o.mine.byID["ip-1"]; got == nil || !reflect.DeepEqual(got, listed) || !ipam.SameTags(got.Entry.Tags(), ip.Tags) {
		t.Fatalf("indexed %+v, listed %+v", got, listed)
	}
	// The next listing started before the booking answered: the view
	// marks the address from the index alone.
	o.load(nil, "prod", now.Add(-time.Second))
	if got := o.holders[ip.Address]; !reflect.DeepEqual(got, listed) {
		t.Fatalf("rebuilt from the index: %+v, listed %+v", got, listed)
	}
}
