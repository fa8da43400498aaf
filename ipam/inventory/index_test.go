package inventory

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A listing that started before this replica's own write does not drop it;
// one that started after decides.
func TestRebuiltKeepsWritesAfterTheListingStarted(t *testing.T) {
	now := time.Now()
	x := newIndex()
	x.put(&indexed{id: "ip-1", address: netip.MustParseAddr("10.0.0.1"), pool: "small", service: types.NamespacedName{Namespace: "web", Name: "api"}, learned: now})
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
