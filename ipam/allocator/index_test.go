package allocator

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// indexedAlloc returns an allocator over allocEnv's pools whose indexes were
// listed once, as Start does, on a fake clock.
func indexedAlloc(t *testing.T, r References) (*env, *Allocator, *clocktesting.FakeClock) {
	t.Helper()
	e, base := allocEnv(t, r)
	clk := clocktesting.NewFakeClock(time.Now())
	a := newAllocator(Options{Cloud: e.Cloud, Config: base.Config(), References: r, Clock: clk})
	if err := a.inv.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Srv.ResetCounts()
	return e, a, clk
}

// otherReplicaBooks books web/api in p through a second allocator on the
// same emulator and pool file, as another webhook replica would, after
// mine's last listing.
func otherReplicaBooks(t *testing.T, e *env, mine *Allocator, p *ipam.Pool) (*Allocator, *ipam.Grant) {
	t.Helper()
	other := newAllocator(Options{Cloud: e.Cloud, Config: mine.Config()})
	theirs, err := other.Reserve(context.Background(), ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	return other, theirs
}

// A Service the index holds nothing for costs its booking alone, for every
// kind of pool request.
func TestIndexedCreateBooksDirectly(t *testing.T) {
	e, a, _ := indexedAlloc(t, nil)
	ctx := context.Background()
	for _, req := range []ipam.Request{
		{Pool: pool(t, a, "ranged"), Service: svc("web", "picked")},
		{Pool: pool(t, a, "small"), Service: svc("web", "chosen")},
		{Pool: pool(t, a, "manual"), Service: svc("web", "asked"), Address: mustAddr("172.16.34.9")},
	} {
		e.Srv.ResetCounts()
		r, err := a.Reserve(ctx, req)
		if err != nil || !r.Booked {
			t.Fatalf("%s: %+v %v", req.Pool.Name, r, err)
		}
		if got := e.Calls(countedOps...); got != "ListIPs=0 BookIP=1 UpdateIP=0 GetIP=0 ReleaseIP=0" {
			t.Fatalf("%s: calls %s", req.Pool.Name, got)
		}
	}
}

// The dangerous order: the index still shows the Service's retained IP as
// reusable, and behind its back the sweeper released it, another cluster's
// admission took the address, or the previous Load Balancer still holds
// it. The re-read decides every time; trusting the index would hand out a
// released ID, or move the Service to a new address under its old LB.
func TestIndexCandidateIsReadAgainBeforeItIsHandedOut(t *testing.T) {
	e, a, _ := indexedAlloc(t, nil)
	ctx := context.Background()
	p := pool(t, a, "ranged")
	first, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}

	// Released by the sweeper (another replica's) since: a fresh booking,
	// and the index forgets the ID.
	if err := e.Cloud.ReleaseIP(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	e.Srv.ResetCounts()
	second, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || second.ID == first.ID || !second.Booked || second.Reused {
		t.Fatalf("after release: %+v %v", second, err)
	}
	if got := e.Calls(emulator.OpGetIP, emulator.OpBookIP); got != "GetIP=1 BookIP=1" {
		t.Fatalf("calls %s", got)
	}

	// Re-tagged for another Service since (a hand edit, a restore): not
	// handed out.
	entry, _ := ipam.ParseEntry(mustIP(t, e, second.ID).Tags)
	entry.Service = svc("web", "other")
	if _, err := e.Cloud.SetTags(ctx, second.ID, entry.Tags()); err != nil {
		t.Fatal(err)
	}
	third, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || third.ID == second.ID || !third.Booked {
		t.Fatalf("after re-tag: %+v %v", third, err)
	}

	// Attached to the previous Load Balancer since: the retryable refusal,
	// nothing booked.
	if err := e.Srv.Attach(third.ID, emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "lb"}); err != nil {
		t.Fatal(err)
	}
	beingDeleted(a, svc("web", "api"))
	e.Srv.ResetCounts()
	_, err = a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	wantRefusal(t, err, ipam.ReasonStillHeld, third.Address.String(), "retry in a moment")
	if got := e.Calls(emulator.OpGetIP, emulator.OpBookIP); got != "GetIP=1 BookIP=0" {
		t.Fatalf("calls %s", got)
	}
}

// A booking whose answer was lost is still found by listing the Service's
// reservations, with a fresh index too: one booking, adopted.
func TestIndexedLostAnswerIsAdopted(t *testing.T) {
	e, a, _ := indexedAlloc(t, nil)
	ctx := context.Background()
	e.Srv.FailNext(emulator.OpBookIP, 1, emulator.Fault{Status: 500, CommitThenFail: true})
	r, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "small"), Service: svc("web", "api")})
	if err != nil || r.ID == "" || r.Booked {
		t.Fatalf("%+v %v", r, err)
	}
	if n := len(e.Srv.IPs()); n != 1 {
		t.Fatalf("%d IPs booked, want 1", n)
	}
	if got := e.Calls(emulator.OpBookIP, emulator.OpListIPs); got != "BookIP=1 ListIPs=1" {
		t.Fatalf("calls %s", got)
	}
}

// Past the TTL without a listing (Scaleway refused the background ones),
// the index is not trusted: the Service's reservations are listed, as
// without an index, and the retained IP is found.
func TestStaleIndexListsTheService(t *testing.T) {
	e, a, clk := indexedAlloc(t, nil)
	ctx := context.Background()
	_, theirs := otherReplicaBooks(t, e, a, pool(t, a, "small"))
	clk.Step(inventory.DefaultOccupancyTTL + time.Second)
	e.Srv.ResetCounts()
	back, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "small"), Service: svc("web", "api")})
	if err != nil || back.ID != theirs.ID {
		t.Fatalf("%+v %v", back, err)
	}
	if got := e.Calls(countedOps...); got != "ListIPs=1 BookIP=0 UpdateIP=0 GetIP=0 ReleaseIP=0" {
		t.Fatalf("calls %s", got)
	}
}

// The index follows this replica's own writes between listings: a
// release forgets, a booking adds, and a listing that started before a
// booking does not drop it.
func TestIndexFollowsOwnWrites(t *testing.T) {
	e, a, clk := indexedAlloc(t, nil)
	ctx := context.Background()
	p := pool(t, a, "small")
	r, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	if s, pool, ok := a.inv.Knows(r.ID); !ok || s != svc("web", "api") || pool != "small" {
		t.Fatalf("booking not indexed: %v %q %v", s, pool, ok)
	}
	if err := a.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := a.inv.Knows(r.ID); ok {
		t.Fatal("released reservation still indexed")
	}
	_, _ = e, clk
}
