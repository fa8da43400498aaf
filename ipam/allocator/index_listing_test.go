package allocator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// heldListing answers a listing of a subnet with what it read, but only
// once the test lets it: a listing that read the subnet before a booking
// and lands after. Listings of a Service's reservations go through.
type heldListing struct {
	scaleway.Cloud
	pn      string // the Private Network whose listing is held
	hold    *atomic.Bool
	read    chan struct{}
	release chan struct{}
}

// newHeldListing holds the listings of Private Network pn while its hold
// is set.
func newHeldListing(cloud scaleway.Cloud, pn string) heldListing {
	return heldListing{Cloud: cloud, pn: pn, hold: &atomic.Bool{}, read: make(chan struct{}), release: make(chan struct{})}
}

// heldAllocator is an allocator whose listings of network pn can be held.
func heldAllocator(t *testing.T, pn string) (*Allocator, heldListing, *env) {
	t.Helper()
	e, base := allocEnv(t, nil)
	cloud := newHeldListing(e.Cloud, e.PNs[pn].ID)
	return newAllocator(Options{Cloud: cloud, Config: base.Config()}), cloud, e
}

func (h heldListing) ListIPs(ctx context.Context, f scaleway.ListFilter) ([]*scaleway.IP, error) {
	ips, err := h.Cloud.ListIPs(ctx, f)
	if f.PrivateNetworkID == h.pn && len(f.Tags) == 0 && h.hold.Load() {
		h.read <- struct{}{}
		<-h.release
	}
	return ips, err
}

// The dangerous order for the index: a background listing reads the
// subnet, this replica books for a Service, then the listing's answer
// lands without that booking. The booking must stay indexed: the Service's
// retried CREATE then takes it back instead of booking a second IP.
func TestListingThatReadBeforeABookingKeepsIt(t *testing.T) {
	ctx := context.Background()
	a, cloud, e := heldAllocator(t, "edge")
	hold := cloud.hold
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := pool(t, a, "small")
	hold.Store(true)
	done := make(chan error)
	go func() { done <- a.inv.Refresh(ctx) }()
	<-cloud.read // the listing has read the subnet
	hold.Store(false)
	first, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	close(cloud.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.Srv.ResetCounts()
	again, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
	if err != nil || again.ID != first.ID || !again.Reused {
		t.Fatalf("retry after the listing landed: %+v %v (first %s)", again, err, first.ID)
	}
	if got := e.Calls(emulator.OpGetIP, emulator.OpBookIP); got != "GetIP=1 BookIP=0" {
		t.Fatalf("calls %s", got)
	}
}

// Admissions, background listings and the Service cache's hints at once
// (run with -race): every reservation distinct, and a final listing
// indexes them all.
func TestIndexUnderConcurrentUse(t *testing.T) {
	e, a, _ := indexedAlloc(t, nil)
	ctx := context.Background()
	p := pool(t, a, "auto")
	const n = 30
	ids := make([]string, n)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = a.inv.Refresh(ctx)
			}
		}
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := svc("web", fmt.Sprint("s", i))
			r, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: s})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.ID
			a.Remember(s, []string{r.ID})
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if id == "" || seen[id] {
			t.Fatalf("reservation %d: %q (duplicate or missing)", i, id)
		}
		seen[id] = true
		if s, _, ok := a.inv.Knows(id); !ok || s != svc("web", fmt.Sprint("s", i)) {
			t.Fatalf("%s not indexed for s%d: %v", id, i, s)
		}
	}
	if len(e.Srv.IPs()) != n {
		t.Fatalf("%d IPs booked for %d reservations", len(e.Srv.IPs()), n)
	}
}

// countingCloud counts ListIPs calls of a whole subnet (no tag filter).
type countingCloud struct {
	scaleway.Cloud
	subnetListings *atomic.Int64
}

func (c countingCloud) ListIPs(ctx context.Context, f scaleway.ListFilter) ([]*scaleway.IP, error) {
	if len(f.Tags) == 0 {
		c.subnetListings.Add(1)
		time.Sleep(20 * time.Millisecond) // a listing of many pages: the burst arrives meanwhile
	}
	return c.Cloud.ListIPs(ctx, f)
}

// A burst of admissions on a stale view lists the subnet once: the others
// wait for that listing instead of each listing the subnet again.
func TestStaleViewIsListedOnceForABurst(t *testing.T) {
	e, base := allocEnv(t, nil)
	n := &atomic.Int64{}
	a := newAllocator(Options{Cloud: countingCloud{Cloud: e.Cloud, subnetListings: n}, Config: base.Config()})
	p := pool(t, a, "ranged")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := a.Reserve(context.Background(), ipam.Request{Pool: p, Service: svc("web", fmt.Sprint("s", i)), DryRun: true}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := n.Load(); got != 1 {
		t.Fatalf("%d listings of the subnet for one burst, want 1", got)
	}
}

// The background refresh lists while admissions go on with the current
// view: a CREATE is not held up by a listing in flight.
func TestRefreshDoesNotHoldAdmissionsUp(t *testing.T) {
	ctx := context.Background()
	a, cloud, _ := heldAllocator(t, "dc")
	hold := cloud.hold
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	reserveDuringHeldRefresh(t, a, cloud, hold, pool(t, a, "ranged"))
}

// reserveDuringHeldRefresh starts a background refresh whose listing of
// the pool's subnet cloud holds, then a CREATE in pool p, and fails if the
// CREATE waits for that listing; the listing is then let go.
func reserveDuringHeldRefresh(t *testing.T, a *Allocator, cloud heldListing, hold *atomic.Bool, p *ipam.Pool) {
	t.Helper()
	ctx := context.Background()
	hold.Store(true)
	done := make(chan error)
	go func() { done <- a.inv.Refresh(ctx) }()
	<-cloud.read // the refresh's listing of the pool's subnet is in flight
	booked := make(chan error)
	go func() {
		_, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")})
		booked <- err
	}()
	select {
	case err := <-booked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the admission waited for the background listing")
	}
	hold.Store(false)
	close(cloud.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A relist that conflicts asked for does not hold admissions up either:
// while the background refresh's listing of the subnet is slow, a CREATE
// picks from the current view (its TTL has not run out) instead of
// waiting on that listing.
func TestRelistDoesNotHoldAdmissionsUp(t *testing.T) {
	ctx := context.Background()
	a, cloud, _ := heldAllocator(t, "dc")
	hold := cloud.hold
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := pool(t, a, "ranged")
	a.inv.Subnets().Relist(p) // conflicts asked for a relist
	reserveDuringHeldRefresh(t, a, cloud, hold, p)
	if a.inv.Subnets().Relisting(p) {
		t.Fatal("the relist is still pending after the listing")
	}
}

// A replica reports itself listed (and so ready) only once Start's first
// listing of the pools has ended.
func TestListedAfterTheFirstListing(t *testing.T) {
	a, cloud, _ := heldAllocator(t, "dc")
	hold := cloud.hold
	hold.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.inv.Start(ctx) }()
	<-cloud.read
	if a.inv.Listed() {
		t.Fatal("listed while the first listing is in flight")
	}
	hold.Store(false)
	close(cloud.release)
	if !localrun.Poll(5*time.Second, 5*time.Millisecond, a.inv.Listed) {
		t.Fatal("not listed after the first listing ended")
	}
}

// A listing started by an admission whose context then ends still serves
// the admissions waiting on it.
func TestListingOutlivesTheAdmissionThatStartedIt(t *testing.T) {
	a, cloud, _ := heldAllocator(t, "dc")
	hold := cloud.hold
	hold.Store(true)
	p := pool(t, a, "ranged")
	first, cancel := context.WithCancel(context.Background())
	firstDone := make(chan error)
	go func() {
		_, err := a.Reserve(first, ipam.Request{Pool: p, Service: svc("web", "one")})
		firstDone <- err
	}()
	<-cloud.read
	secondDone := make(chan error)
	go func() {
		_, err := a.Reserve(context.Background(), ipam.Request{Pool: p, Service: svc("web", "two")})
		secondDone <- err
	}()
	time.Sleep(20 * time.Millisecond) // the second waits on the listing
	cancel()
	if err := <-firstDone; err == nil {
		t.Fatal("the cancelled admission succeeded")
	}
	hold.Store(false)
	close(cloud.release)
	if err := <-secondDone; err != nil {
		t.Fatalf("the waiting admission failed with the first one's end: %v", err)
	}
}

// A picked address someone else took (a conflict) stays marked until the
// next listing, which shows who holds it, and no longer: once freed there,
// it is free in the view too.
func TestConflictMarkLastsUntilTheNextListing(t *testing.T) {
	e, base := allocEnv(t, nil)
	ctx := context.Background()
	a := newAllocator(Options{Cloud: e.Cloud, Config: base.Config(), Rand: func(uint64) uint64 { return 0 }})
	p := pool(t, a, "ranged")
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	theirs, err := e.Srv.AddIP(e.PNs["dc"].ID, mustAddr("172.16.35.200"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("web", "api")}); err != nil || r.Address != mustAddr("172.16.35.201") {
		t.Fatalf("%+v %v", r, err)
	}
	if err := e.Cloud.ReleaseIP(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if err := a.inv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if a.inv.Subnets().Marked(p, mustAddr("172.16.35.200")) {
		t.Fatal("the conflict's mark outlived a listing that shows the address free")
	}
	if st := a.inv.Stats(); st[1].Pool != "ranged" || st[1].UsedByCluster+st[1].UsedByOthers != 1 {
		t.Fatalf("stats %+v", st[1])
	}
}

// A relist asked for by conflicts does not make the index stale: the
// sticky path keeps reading it, and the pool's gauges stay.
func TestRelistKeepsTheIndexInUse(t *testing.T) {
	_, a, _ := indexedAlloc(t, nil)
	p := pool(t, a, "ranged")
	a.inv.Subnets().Relist(p)
	if _, _, fresh := a.inv.Candidates(ipam.Request{Pool: p, Service: svc("web", "api")}); !fresh {
		t.Fatal("the index went stale with the relist")
	}
	if !a.inv.Stats()[1].Known {
		t.Fatal("the pool's gauges went away with the relist")
	}
}
