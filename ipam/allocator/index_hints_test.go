package allocator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// Hints do not pile up while one pool's listing keeps failing: past the
// TTL the sticky path lists the Service and reads none.
func TestHintsBoundedWhileAListingFails(t *testing.T) {
	e, a, clk := indexedAlloc(t, nil)
	ctx := context.Background()
	for i := range 100 {
		a.Remember(svc("web", fmt.Sprint("s", i)), []string{fmt.Sprint("id-", i)})
	}
	e.Srv.FailNext(emulator.OpListIPs, 1000, emulator.Fault{Status: 403})
	clk.Step(inventory.DefaultOccupancyTTL + time.Second)
	if err := a.inv.Refresh(ctx); err == nil {
		t.Fatal("the listings did not fail")
	}
	if left := a.inv.Hints(); left != 0 {
		t.Fatalf("%d hints kept past the TTL while listings fail", left)
	}
}

// Refresh joins a listing an admission started: a hint recorded after that
// listing started (its ID may not be in it) must outlive the Refresh, which
// counts from the listing's start, not its own.
func TestRefreshJoiningAListingKeepsLaterHints(t *testing.T) {
	e, base := allocEnv(t, nil)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := newHeldListing(e.Cloud, e.PNs["dc"].ID)
	hold := cloud.hold
	joined := make(chan struct{}, 1)
	inv := inventory.New(inventory.Options{Cloud: cloud, Config: base.Config(), Clock: clk, Joined: func() {
		select {
		case joined <- struct{}{}:
		default:
		}
	}})
	a := newAllocator(Options{Inventory: inv, Cloud: cloud, Clock: clk})
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := pool(t, a, "ranged")
	a.inv.Subnets().Relist(p) // conflicts asked for a relist
	hold.Store(true)
	admitted := make(chan error)
	go func() {
		_, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "one")})
		admitted <- err
	}()
	<-cloud.read // the admission's listing has read the subnet
	clk.Step(time.Second)
	a.Remember(svc("web", "api"), []string{"booked-meanwhile"})
	clk.Step(time.Second)
	refreshed := make(chan error)
	go func() { refreshed <- a.inv.Refresh(ctx) }()
	select { // the Refresh waits on the listing in flight
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("the Refresh did not join the listing in flight")
	}
	hold.Store(false)
	close(cloud.release)
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a.inv.Hinted(svc("web", "api")), "booked-meanwhile") {
		t.Fatal("a hint newer than the listing the Refresh joined was dropped")
	}
}

// The index read a reservation past its reuse window; since, another
// replica's re-created Service took it back (orphaned-since cleared) and
// the Service cache showed it. Trusting the stale orphaned-since would
// skip it; the later hint has it re-read and taken back.
func TestLaterHintOverridesAStaleOrphanedSince(t *testing.T) {
	e, base := allocEnv(t, nil)
	ctx := context.Background()
	p := pool(t, base, "small")
	x, err := base.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := ipam.ParseEntry(mustIP(t, e, x.ID).Tags)
	entry.UID, entry.OrphanedSince = "uid-1", time.Now().Add(-25*time.Hour)
	if _, err := e.Cloud.SetTags(ctx, x.ID, entry.Tags()); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	a := newAllocator(Options{Cloud: e.Cloud, Config: base.Config(), Clock: clk})
	if err := a.inv.Refresh(ctx); err != nil { // indexed: past its retention
		t.Fatal(err)
	}
	entry.OrphanedSince = time.Time{} // taken back elsewhere
	if _, err := e.Cloud.SetTags(ctx, x.ID, entry.Tags()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	a.Remember(svc("web", "api"), []string{x.ID})
	back, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || back.ID != x.ID || !back.Reused {
		t.Fatalf("got %+v %v, want %s taken back", back, err, x.ID)
	}
}
