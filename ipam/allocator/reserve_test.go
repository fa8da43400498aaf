package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

func TestReserveIPAMChooses(t *testing.T) {
	e, a := allocEnv(t, nil)
	e.Srv.ResetCounts()
	r, err := a.Reserve(context.Background(), ipam.Request{Pool: pool(t, a, "small"), Service: svc("web", "front")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Address != mustAddr("10.10.0.2") || !r.Booked || r.Reused || r.PrivateNetworkID != e.PNs["edge"].ID {
		t.Fatalf("reservation = %+v", r)
	}
	if got := e.Calls(countedOps...); got != "ListIPs=1 BookIP=1 UpdateIP=0 GetIP=0 ReleaseIP=0" {
		t.Fatalf("calls: %s", got)
	}
	ip, ok := e.Srv.IP(r.ID)
	if !ok {
		t.Fatal("not booked in the emulator")
	}
	want := []string{"scw-lb-ipam", "scw-lb-ipam/cluster=test", "scw-lb-ipam/pool=small", "scw-lb-ipam/service=web/front", "scw-lb-ipam/namespace=web"}
	if !ipam.SameTags(ip.Tags, want) {
		t.Fatalf("tags = %v, want %v", ip.Tags, want)
	}
}

func TestReserveSpecificAddress(t *testing.T) {
	e, a := allocEnv(t, nil)
	ctx := context.Background()
	p := pool(t, a, "small")
	r, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "a"), Address: mustAddr("10.10.0.5")})
	if err != nil || r.Address != mustAddr("10.10.0.5") {
		t.Fatalf("r=%+v err=%v", r, err)
	}

	// The same address for another Service names the holder.
	_, err = a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "b"), Address: mustAddr("10.10.0.5")})
	wantRefusal(t, err, ipam.ReasonAddressTaken, "address 10.10.0.5", "held by Service web/a (cluster test)", "ask for another address")

	// An address held by another resource names that resource.
	if _, err := e.Srv.AddIP(e.PNs["edge"].ID, mustAddr("10.10.0.4"), nil, &emulator.Resource{Type: "rdb_instance", ID: "db-1", Name: "orders-db"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "c"), Address: mustAddr("10.10.0.4")})
	wantRefusal(t, err, ipam.ReasonAddressTaken, "held by rdb_instance orders-db")

	// Outside the pool: refused before any booking.
	e.Srv.ResetCounts()
	_, err = a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "ranged"), Service: svc("web", "d"), Address: mustAddr("172.16.32.9")})
	wantRefusal(t, err, ipam.ReasonAddressOutsidePool, `not in pool "ranged" (172.16.35.200-172.16.35.203)`)
	// The subnet's last two addresses belong to IPAM.
	_, err = a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "d"), Address: mustAddr("10.10.0.6")})
	wantRefusal(t, err, ipam.ReasonAddressOutsidePool, "10.10.0.6")
	if n := e.Srv.Count(emulator.OpBookIP); n != 0 {
		t.Fatalf("refused requests booked %d times", n)
	}
}

func TestReserveRangePickSkipsConflicts(t *testing.T) {
	live := refs{}
	e, a := allocEnv(t, live)
	ctx := context.Background()
	p := pool(t, a, "ranged")
	pn := e.PNs["dc"].ID
	// Known before the first pick: listed with the subnet.
	if _, err := e.Srv.AddIP(pn, mustAddr("172.16.35.200"), []string{"vm"}, nil); err != nil {
		t.Fatal(err)
	}
	r1, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "one")})
	if err != nil || r1.Address != mustAddr("172.16.35.201") {
		t.Fatalf("first pick: %+v %v", r1, err)
	}
	// Taken behind the allocator's back after its listing: a conflict.
	if _, err := e.Srv.AddIP(pn, mustAddr("172.16.35.202"), nil, nil); err != nil {
		t.Fatal(err)
	}
	e.Srv.ResetCounts()
	r2, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "two")})
	if err != nil || r2.Address != mustAddr("172.16.35.203") {
		t.Fatalf("pick after conflict: %+v %v", r2, err)
	}
	// The index (from the first pick's listing) knows the Service has no
	// reservation: no sticky lookup, the bookings alone.
	if got := e.Calls(emulator.OpBookIP, emulator.OpListIPs); got != "BookIP=2 ListIPs=0" {
		t.Fatalf("calls: %s", got)
	}
	// Full now, of live Services: refused with counts, no booking.
	live[r1.ID], live[r2.ID] = svc("web", "one"), svc("web", "two")
	e.Srv.ResetCounts()
	_, err = a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "three")})
	wantRefusal(t, err, ipam.ReasonPoolExhausted, `pool "ranged" is exhausted (4/4 used)`)
	if n := e.Srv.Count(emulator.OpBookIP); n != 0 {
		t.Fatalf("exhausted pool booked %d times", n)
	}
}

func TestReserveIPAMExhausted(t *testing.T) {
	_, a := allocEnv(t, nil)
	ctx := context.Background()
	p := pool(t, a, "small") // a /29: four addresses after IPAM's own four
	for i := range 4 {
		if _, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", fmt.Sprint("s", i))}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "s4")})
	wantRefusal(t, err, ipam.ReasonPoolExhausted, `pool "small" is exhausted (4/4 used)`)
}

// TestReserveSticky walks one Service's reservation through the cases
// where it is taken back and those where it is not, each phase building on
// the reservations the previous ones left.
func TestReserveSticky(t *testing.T) {
	r := refs{}
	e, a := allocEnv(t, r)
	ctx := context.Background()
	p := pool(t, a, "ranged")
	first, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	stickyRetryWritesNothing(t, e, a, p, first)
	stickyComebackClearsOrphanedSince(t, e, a, p, first)
	notRef := stickyNotReused(t, r, e, a, p, first)
	stickyWaitsForThePreviousLB(t, e, a, p, first)
	stickySkipsOtherAttachments(t, e, a, p, first, notRef)
}

// stickyRetryWritesNothing: a client retry of the same CREATE gets the same
// IP, nothing written; the index knows it, the re-read decides.
func stickyRetryWritesNothing(t *testing.T, e *env, a *Allocator, p *ipam.Pool, first *ipam.Grant) {
	t.Helper()
	e.Srv.ResetCounts()
	again, err := a.Reserve(context.Background(), ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || again.ID != first.ID || !again.Reused || again.Booked {
		t.Fatalf("retry: %+v %v", again, err)
	}
	if got := e.Calls(countedOps...); got != "ListIPs=0 BookIP=0 UpdateIP=0 GetIP=1 ReleaseIP=0" {
		t.Fatalf("calls: %s", got)
	}
}

// stickyComebackClearsOrphanedSince: used by a live Service (uid
// back-filled), orphaned by the sweeper an hour ago, then the Service comes
// back: the tag goes.
func stickyComebackClearsOrphanedSince(t *testing.T, e *env, a *Allocator, p *ipam.Pool, first *ipam.Grant) {
	t.Helper()
	ctx := context.Background()
	entry, _ := ipam.ParseEntry(mustIP(t, e, first.ID).Tags)
	entry.UID, entry.OrphanedSince = "uid-1", time.Now().Add(-time.Hour)
	if _, err := e.Cloud.SetTags(ctx, first.ID, entry.Tags()); err != nil {
		t.Fatal(err)
	}
	e.Srv.ResetCounts()
	back, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || back.ID != first.ID || !back.Reused {
		t.Fatalf("sticky: %+v %v", back, err)
	}
	if got := e.Calls(countedOps...); got != "ListIPs=0 BookIP=0 UpdateIP=1 GetIP=1 ReleaseIP=0" {
		t.Fatalf("calls: %s", got)
	}
	if got, _ := ipam.ParseEntry(mustIP(t, e, first.ID).Tags); !got.OrphanedSince.IsZero() {
		t.Fatal("orphaned-since still set after reuse")
	}
}

// stickyNotReused: not reused for another Service's name, in another pool,
// nor while another Service references it; it returns the reservation
// web/api got instead of the referenced one, which is then attached to a
// Load Balancer as first is to the previous one.
func stickyNotReused(t *testing.T, r refs, e *env, a *Allocator, p *ipam.Pool, first *ipam.Grant) *ipam.Grant {
	t.Helper()
	ctx := context.Background()
	other, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "other")})
	if err != nil || other.ID == first.ID {
		t.Fatalf("other service: %+v %v", other, err)
	}
	inAuto, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "auto"), Service: svc("web", "api")})
	if err != nil || inAuto.ID == first.ID {
		t.Fatalf("other pool: %+v %v", inAuto, err)
	}
	r[first.ID] = svc("web", "impostor")
	notRef, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || notRef.ID == first.ID {
		t.Fatalf("referenced IP reused: %+v %v", notRef, err)
	}
	delete(r, first.ID)
	if err := e.Srv.Attach(notRef.ID, emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "lb"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Srv.Attach(first.ID, emulator.Resource{Type: "lb_server", ID: "lb-2", Name: "lb2"}); err != nil {
		t.Fatal(err)
	}
	return notRef
}

// stickyWaitsForThePreviousLB: the oldest reservation is still attached to
// the previous Load Balancer: book nothing, ask to retry, so that the
// Service gets it back once detached instead of a new address. While the
// previous Service object exists (Terminating behind the CCM's finalizer)
// the CREATE cannot succeed: retry.
func stickyWaitsForThePreviousLB(t *testing.T, e *env, a *Allocator, p *ipam.Pool, first *ipam.Grant) {
	t.Helper()
	ctx := context.Background()
	withoutTerminating := a.refs
	beingDeleted(a, svc("web", "api"))
	e.Srv.ResetCounts()
	_, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	wantRefusal(t, err, ipam.ReasonStillHeld, "address 172.16.35.200", "still held by the Load Balancer of the previous web/api", "retry in a moment")
	// Both of its reservations are read before the choice.
	if got := e.Calls(countedOps...); got != "ListIPs=0 BookIP=0 UpdateIP=0 GetIP=2 ReleaseIP=0" {
		t.Fatalf("calls: %s", got)
	}
	// Once it is gone the re-create takes its reservation back although the
	// previous Load Balancer, which Scaleway deletes late, still holds it.
	a.refs = withoutTerminating
	back, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || back.ID != first.ID || !back.Reused {
		t.Fatalf("re-create after the previous Service is gone: %+v %v, want %s back", back, err, first.ID)
	}
}

// stickySkipsOtherAttachments: attached to something else than a Load
// Balancer, a reservation is not ours to wait for: a fresh one is booked.
func stickySkipsOtherAttachments(t *testing.T, e *env, a *Allocator, p *ipam.Pool, first, notRef *ipam.Grant) {
	t.Helper()
	if err := e.Srv.Detach(first.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Srv.Attach(first.ID, emulator.Resource{Type: "instance_server", ID: "vm", Name: "vm"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Srv.Detach(notRef.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Srv.Attach(notRef.ID, emulator.Resource{Type: "instance_server", ID: "vm2", Name: "vm2"}); err != nil {
		t.Fatal(err)
	}
	fresh, err := a.Reserve(context.Background(), ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || fresh.ID == first.ID || fresh.ID == notRef.ID || !fresh.Booked {
		t.Fatalf("IPs attached to other resources must not be reused: %+v %v", fresh, err)
	}
}

func TestReserveWithSpecificAddressIsStickyOnlyForThatAddress(t *testing.T) {
	e, a := allocEnv(t, nil)
	ctx := context.Background()
	p := pool(t, a, "manual")
	r1, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api"), Address: mustAddr("172.16.34.10")})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api"), Address: mustAddr("172.16.34.10")})
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("same address again: %+v %v", r2, err)
	}
	r3, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api"), Address: mustAddr("172.16.34.11")})
	if err != nil || r3.ID == r1.ID || r3.Address != mustAddr("172.16.34.11") {
		t.Fatalf("other address: %+v %v", r3, err)
	}
	_ = e
}

func TestReserveRefusals(t *testing.T) {
	e, a := allocEnv(t, nil)
	ctx := context.Background()
	e.Srv.ResetCounts()
	_, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "drained"), Service: svc("web", "x")})
	wantRefusal(t, err, ipam.ReasonPoolDisabled, `pool "drained" is disabled`, "ask for another pool")
	_, err = a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "manual"), Service: svc("web", "x")})
	wantRefusal(t, err, ipam.ReasonAddressRequired, "autoAssign: false", "scw-lb-ipam.io/address", "172.16.34.0/24")
	// The Service's own reservation is looked up before pool policy (a
	// drained pool gives its Services theirs back): a read, nothing written.
	if got := e.Calls(countedOps...); got != "ListIPs=2 BookIP=0 UpdateIP=0 GetIP=0 ReleaseIP=0" {
		t.Fatalf("refusals wrote to the API: %s", got)
	}
}

func TestReserveDryRunBooksNothing(t *testing.T) {
	e, a := allocEnv(t, nil)
	ctx := context.Background()
	e.Srv.ResetCounts()
	for _, req := range []ipam.Request{
		{Pool: pool(t, a, "ranged"), Service: svc("web", "x"), DryRun: true},
		{Pool: pool(t, a, "small"), Service: svc("web", "x"), DryRun: true},
		{Pool: pool(t, a, "manual"), Service: svc("web", "x"), Address: mustAddr("172.16.34.20"), DryRun: true},
	} {
		r, err := a.Reserve(ctx, req)
		if err != nil || r.ID != "" || r.Booked {
			t.Fatalf("dry run %s: %+v %v", req.Pool.Name, r, err)
		}
		if req.Pool.Name == "ranged" && r.Address != mustAddr("172.16.35.200") {
			t.Fatalf("predicted %s", r.Address)
		}
	}
	if n := e.Srv.Count(emulator.OpBookIP) + e.Srv.Count(emulator.OpUpdateIP); n != 0 {
		t.Fatalf("dry run wrote %d times", n)
	}
	if len(e.Srv.IPs()) != 0 {
		t.Fatalf("dry run left IPs: %v", e.Srv.IPs())
	}
}

func TestReserveRecoversCommittedBooking(t *testing.T) {
	e, a := allocEnv(t, nil)
	ctx := context.Background()
	// The booking happens, the answer is a 500: the allocator must find it
	// rather than book a second address.
	e.Srv.FailNext(emulator.OpBookIP, 1, emulator.Fault{Status: 500, CommitThenFail: true})
	r, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "small"), Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.Srv.IPs()); n != 1 {
		t.Fatalf("%d IPs booked, want 1", n)
	}
	// Adopted, not Booked: not this admission's to release (it may be
	// another admission's booking of the same Service).
	if r.Booked || r.Address != mustAddr("10.10.0.2") {
		t.Fatalf("reservation = %+v", r)
	}
	// A lost answer with nothing behind it: booked on the second try.
	e.Srv.FailNext(emulator.OpBookIP, 1, emulator.Fault{Status: 503})
	r2, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "small"), Service: svc("web", "two")})
	if err != nil || r2.Address != mustAddr("10.10.0.3") {
		t.Fatalf("after 503: %+v %v", r2, err)
	}
	if n := len(e.Srv.IPs()); n != 2 {
		t.Fatalf("%d IPs booked, want 2", n)
	}
}

func TestReserveUnavailable(t *testing.T) {
	e, a := allocEnv(t, nil)
	e.Srv.FailNext(emulator.OpBookIP, 10, emulator.Fault{Status: 503})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "small"), Service: svc("web", "api")})
	wantRefusal(t, err, ipam.ReasonUnavailable, "unavailable after retries", "nothing was reserved")
	if n := len(e.Srv.IPs()); n != 0 {
		t.Fatalf("%d IPs booked", n)
	}
	if strings.Contains(err.Error(), emulator.TestSecretKey) {
		t.Fatal("the secret key leaked into an error")
	}
}

func TestReserveConcurrentPicksAreDistinct(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	cfg := e.Config(t, poolFile(`  - {name: wide, privateNetworkID: "{{dc}}", ranges: ["172.16.33.0/26"]}`))
	a := newAllocator(Options{Cloud: e.Cloud, Config: cfg})
	const n = 40
	var wg sync.WaitGroup
	got := make([]*ipam.Grant, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = a.Reserve(context.Background(), ipam.Request{Pool: cfg.Pools[0], Service: svc("web", fmt.Sprint("s", i))})
		})
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("reserve %d: %v", i, errs[i])
		}
		if seen[got[i].Address] {
			t.Fatalf("address %s handed out twice", got[i].Address)
		}
		seen[got[i].Address] = true
	}
	if b := e.Srv.Count(emulator.OpBookIP); b != n {
		t.Fatalf("%d bookings for %d reservations: picks collided", b, n)
	}
}
