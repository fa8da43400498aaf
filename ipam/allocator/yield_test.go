package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// barrierCloud holds every BookIP until n of them have been made: the
// admissions that all found one address left in their namespace's share
// book at the same moment.
type barrierCloud struct {
	scaleway.Cloud
	wg *sync.WaitGroup
}

func (c barrierCloud) BookIP(ctx context.Context, r scaleway.BookRequest) (*scaleway.IP, error) {
	c.wg.Done()
	c.wg.Wait()
	return c.Cloud.BookIP(ctx, r)
}

// TestShareHoldsAcrossReplicas: a namespace holding 2 of its share of 3,
// and three replicas admitting one Service each at once, every one of
// which counted 2 before any booked. Without the check after the booking
// the namespace would end at 5; with it, the newer bookings give theirs
// back and exactly one admission succeeds, in whatever order IPAM
// answered.
func TestShareHoldsAcrossReplicas(t *testing.T) {
	for run := range 5 {
		e, a := allocEnv(t, nil)
		p := pool(t, a, "auto")
		three := 3
		p.MaxPerNamespace = &three
		ctx := context.Background()
		for _, name := range []string{"a", "b"} {
			if _, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("ci", name)}); err != nil {
				t.Fatal(err)
			}
		}
		var barrier sync.WaitGroup
		barrier.Add(3)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range 3 {
			replica := newAllocator(Options{Cloud: barrierCloud{Cloud: e.Cloud, wg: &barrier}, Config: a.Config()})
			wg.Go(func() {
				_, errs[i] = replica.Reserve(ctx, ipam.Request{Pool: p, Service: svc("ci", string(rune('c'+i)))})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case ipam.ReasonOf(err) != ipam.ReasonYielding:
				t.Fatalf("run %d: %v, want a retryable refusal", run, err)
			}
		}
		held, err := a.room.holdings(ctx, ipam.Request{Pool: p, Service: svc("ci", "any")})
		if err != nil {
			t.Fatal(err)
		}
		if ok != 1 || len(held) != 3 {
			t.Fatalf("run %d: %d admissions succeeded and namespace ci holds %d addresses; want 1 and its share of 3 (%v)", run, ok, len(held), errs)
		}
	}
}

// ledgerMargin and ledgerOrphaned are the margin and the orphaned-since of
// the TestTheLedgerSaysWhen tests.
const ledgerMargin = 20 * time.Second

var ledgerOrphaned = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// ledger returns the retention policy and the pool the TestTheLedgerSaysWhen
// tests judge by, and at, the time d after ledgerOrphaned: this cluster
// keeps a day; the ledger may say otherwise.
func ledger() (ipam.Retention, *ipam.Pool, func(d time.Duration) time.Time) {
	r := ipam.Retention{PendingGrace: ipam.DefaultPendingGrace, Margin: ledgerMargin}
	p := &ipam.Pool{Name: "p", Retention: ipam.Duration{Duration: 24 * time.Hour}}
	return r, p, func(d time.Duration) time.Time { return ledgerOrphaned.Add(d) }
}

// TestTheLedgerSaysWhen: every reader judges a retained reservation by
// its release-at, whatever its own retention; one without it (an older
// version's) is judged by this cluster's retention and never adopted; a
// stale one (before orphaned-since) is acted on by nobody until the
// sweeper gives it a time at least a margin away.
func TestTheLedgerSaysWhen(t *testing.T) {
	r, p, at := ledger()
	for _, tt := range []struct {
		name    string
		release time.Time // the tag; zero for none
		now     time.Time
		// What each reader concludes.
		reusable, adoptable, releasing, expired bool
		settled                                 time.Time // zero: Settle changes nothing
	}{
		{name: "an hour's release, far", release: at(time.Hour), now: at(time.Minute), reusable: true, adoptable: true},
		{name: "an hour's release, inside the margin", release: at(time.Hour), now: at(time.Hour - ledgerMargin/2), releasing: true},
		{name: "an hour's release, due", release: at(time.Hour), now: at(time.Hour), releasing: true, expired: true},
		{name: "a week's release, past this cluster's day", release: at(7 * 24 * time.Hour), now: at(25 * time.Hour), reusable: true, adoptable: true},
		{name: "older version, within this cluster's day", now: at(time.Hour), reusable: true, settled: at(24 * time.Hour)},
		{name: "older version, past this cluster's day", now: at(25 * time.Hour), releasing: true, expired: true, settled: at(24 * time.Hour)},
		{name: "stale, right after orphaning", release: at(-time.Hour), now: at(time.Minute), settled: at(24 * time.Hour)},
		{name: "stale, past the day", release: at(-time.Hour), now: at(25 * time.Hour), settled: at(25*time.Hour + ledgerMargin)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: tt.release}
			got := [4]bool{r.Reusable(p, e, tt.now), r.Adoptable(p, e, tt.now), r.Releasing(p, e, tt.now), r.Expired(p, e, tt.now)}
			if want := [4]bool{tt.reusable, tt.adoptable, tt.releasing, tt.expired}; got != want {
				t.Fatalf("reusable, adoptable, releasing, expired = %v, want %v", got, want)
			}
			settled, changed := r.Settle(p, e, tt.now)
			if changed != !tt.settled.IsZero() || changed && !settled.ReleaseAt.Equal(tt.settled) {
				t.Fatalf("Settle = %v (changed %v), want %v", settled.ReleaseAt, changed, tt.settled)
			}
		})
	}
}

// TestTheLedgerSaysWhenAPoolIsFull: a full pool's early release is
// honoured by the sweeper and every admission once written.
func TestTheLedgerSaysWhenAPoolIsFull(t *testing.T) {
	r, p, at := ledger()
	yielded := r.Yield(ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(24 * time.Hour)}, at(time.Hour))
	if due := at(time.Hour + ledgerMargin); !r.Expired(p, yielded, due) || r.Reusable(p, yielded, due.Add(-ledgerMargin/2)) {
		t.Fatal("a release brought forward by a full pool is not honoured")
	}
}

// TestTheLedgerSaysWhenTheSweeperFollows: the sweeper follows the pool
// file: later at once, earlier no sooner than the margin from now, an early
// release never.
func TestTheLedgerSaysWhenTheSweeperFollows(t *testing.T) {
	r, _, at := ledger()
	for _, tt := range []struct {
		name      string
		e         ipam.Entry
		retention time.Duration
		now       time.Time
		want      time.Time // zero: unchanged
	}{
		{"longer", ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(time.Hour)}, 24 * time.Hour, at(2 * time.Hour), at(24 * time.Hour)},
		{"shorter, far", ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(24 * time.Hour)}, time.Hour, at(time.Minute), at(time.Hour)},
		{"shorter, past", ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(24 * time.Hour)}, time.Hour, at(2 * time.Hour), at(2*time.Hour + ledgerMargin)},
		{"shorter, already inside the margin", ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(time.Hour)}, 30 * time.Minute, at(time.Hour - ledgerMargin/2), time.Time{}},
		{"same", ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(24 * time.Hour)}, 24 * time.Hour, at(time.Hour), time.Time{}},
		{"early release", ipam.Entry{UID: "u", OrphanedSince: ledgerOrphaned, ReleaseAt: at(time.Hour), Early: true}, 24 * time.Hour, at(time.Minute), time.Time{}},
	} {
		q := &ipam.Pool{Name: "q", Retention: ipam.Duration{Duration: tt.retention}}
		got, changed := r.Follow(q, tt.e, tt.now)
		if changed != !tt.want.IsZero() || changed && !got.ReleaseAt.Equal(tt.want) {
			t.Errorf("Follow %s: %v (changed %v), want %v", tt.name, got.ReleaseAt, changed, tt.want)
		}
	}
}

// TestTheLedgerSaysWhenRetentionStarts: the sweeper starts a retention with
// its release time.
func TestTheLedgerSaysWhenRetentionStarts(t *testing.T) {
	r, p, at := ledger()
	if e := r.Start(p, ipam.Entry{UID: "u"}, ledgerOrphaned); !e.ReleaseAt.Equal(at(24*time.Hour)) || !e.Complete() {
		t.Fatalf("Start = %+v", e)
	}
}

// TestFullPoolCallsStayConstant: a CREATE in a pool full of retained
// reservations costs a constant number of Scaleway calls whatever how many
// hold it: the candidates are chosen from the listing (attached ones and
// those orphaned within the margin are not re-read), and only the chosen
// one is re-read and written. Before, each retained reservation was
// re-read in turn, one GetIP each, until one could yield.
func TestFullPoolCallsStayConstant(t *testing.T) {
	const n = 64
	for _, tt := range []struct {
		name     string
		attached bool
		ago      time.Duration // orphaned that long ago
		yields   bool
	}{
		{"none attached", false, time.Hour, true},
		{"all attached", true, time.Hour, false},
		{"all orphaned within the margin", false, 10 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, "dc=172.16.32.0/22")
			cfg := e.Config(t, poolFile(`  - {name: full, privateNetworkID: "{{dc}}", ranges: ["172.16.35.0/26"], retention: 24h}`+"\n"))
			a := newAllocator(Options{Cloud: e.Cloud, Config: cfg, Retention: ipam.Retention{PendingGrace: time.Hour, Margin: 20 * time.Second}})
			now := time.Now()
			for i := range n {
				orphaned := now.Add(-tt.ago)
				tags := ipam.Entry{Cluster: "test", Pool: "full", Service: svc("old", fmt.Sprint("s-", i)), UID: "u", OrphanedSince: orphaned, ReleaseAt: orphaned.Add(24 * time.Hour)}.Tags()
				var res *emulator.Resource
				if tt.attached {
					res = &emulator.Resource{Type: "lb_server", Name: fmt.Sprint("lb-", i)}
				}
				if _, err := e.Srv.AddIP(e.PNs["dc"].ID, netip.AddrFrom4([4]byte{172, 16, 35, byte(i)}), tags, res); err != nil {
					t.Fatal(err)
				}
			}
			// A running replica's background refresh has listed the pool.
			if err := a.Inventory().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			e.Srv.ResetCounts()
			_, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "full"), Service: svc("payments", "new")})
			if ipam.ReasonOf(err) != ipam.ReasonYielding {
				t.Fatalf("Reserve: %v, want a retryable refusal", err)
			}
			var calls int
			for _, op := range countedOps {
				calls += e.Srv.Count(op)
			}
			if calls > 4 || e.Srv.Count(emulator.OpGetIP) > 1 {
				t.Fatalf("%d calls (%s) with %d retained reservations; want at most 4, one re-read", calls, e.Calls(countedOps...), n)
			}
			if yielded := e.Srv.Count(emulator.OpUpdateIP) == 1; yielded != tt.yields {
				t.Fatalf("brought one forward: %v, want %v (%s)", yielded, tt.yields, e.Calls(countedOps...))
			}
		})
	}
}

// TestFullPoolCallsStayConstantWhenUnsure: the same bound when the view
// is unsure (a reservation just orphaned and not yet marked by the
// sweeper, or one whose release is due: the common case under pressure)
// and the subnet holds other tenants' IPs (VMs, databases, other
// clusters). Before, the pool's whole subnet was listed again, page by
// page: 5 calls with 300 other IPs, ~13 for a full /22 on every retry.
func TestFullPoolCallsStayConstantWhenUnsure(t *testing.T) {
	const others = 300
	for _, tt := range []struct {
		name  string
		entry func(now time.Time) ipam.Entry
	}{
		{"one orphaned and not yet marked", func(time.Time) ipam.Entry {
			return ipam.Entry{Cluster: "test", Pool: "full", Service: svc("old", "just-deleted"), UID: "u"}
		}},
		{"one whose release is due", func(now time.Time) ipam.Entry {
			return ipam.Entry{Cluster: "test", Pool: "full", Service: svc("old", "due"), UID: "u", OrphanedSince: now.Add(-25 * time.Hour), ReleaseAt: now.Add(-time.Hour)}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, "dc=172.16.32.0/22")
			cfg := e.Config(t, poolFile(`  - {name: full, privateNetworkID: "{{dc}}", ranges: ["172.16.35.0/26"], retention: 24h}`+"\n"))
			a := newAllocator(Options{Cloud: e.Cloud, Config: cfg, References: refs{}, Retention: ipam.Retention{PendingGrace: time.Hour, Margin: 20 * time.Second}})
			now := time.Now()
			add := func(addr netip.Addr, tags []string) {
				t.Helper()
				if _, err := e.Srv.AddIP(e.PNs["dc"].ID, addr, tags, nil); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 63 {
				orphaned := now.Add(-time.Hour)
				add(netip.AddrFrom4([4]byte{172, 16, 35, byte(i)}), ipam.Entry{Cluster: "test", Pool: "full", Service: svc("old", fmt.Sprint("s-", i)), UID: "u", OrphanedSince: orphaned, ReleaseAt: orphaned.Add(24 * time.Hour)}.Tags())
			}
			add(netip.AddrFrom4([4]byte{172, 16, 35, 63}), tt.entry(now).Tags())
			// Other tenants on the subnet, outside the pool's range.
			for i := range others {
				var tags []string
				if i%3 == 0 {
					tags = ipam.Entry{Cluster: "other", Pool: "full", Service: svc("x", fmt.Sprint("o-", i))}.Tags()
				}
				add(netip.AddrFrom4([4]byte{172, 16, 32 + byte(i/250), byte(2 + i%250)}), tags)
			}
			if err := a.Inventory().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			e.Srv.ResetCounts()
			_, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "full"), Service: svc("payments", "new")})
			if r := ipam.ReasonOf(err); r != ipam.ReasonYielding && r != ipam.ReasonPoolExhausted {
				t.Fatalf("Reserve: %v, want a full pool's refusal", err)
			}
			var calls int
			for _, op := range countedOps {
				calls += e.Srv.Count(op)
			}
			if calls > 4 {
				t.Fatalf("%d calls (%s) with %d other IPs on the subnet; want at most 4", calls, e.Calls(countedOps...), others)
			}
		})
	}
}

// TestShareCountsFromTheNamespacesListing: a CREATE in a pool with a share
// lists the namespace's reservations, not the cluster's on the network:
// its calls do not grow with the other namespaces' reservations. Before,
// each count paged through every reservation of the cluster there, twice
// per CREATE.
func TestShareCountsFromTheNamespacesListing(t *testing.T) {
	const others = 2000
	ctx := context.Background()
	e := newEnv(t, "wide=172.16.64.0/18")
	cfg := e.Config(t, poolFile(`  - {name: capped, privateNetworkID: "{{wide}}", maxPerNamespace: 4}`+"\n"))
	a := newAllocator(Options{Cloud: e.Cloud, Config: cfg})
	for i := range others {
		tags := ipam.Entry{Cluster: "test", Pool: "capped", Service: svc(fmt.Sprint("team-", i%50), fmt.Sprint("s-", i)), UID: "u"}.Tags()
		if _, err := e.Srv.AddIP(e.PNs["wide"].ID, netip.Addr{}, tags, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "capped"), Service: svc("ci", "warm")}); err != nil {
		t.Fatal(err)
	}
	e.Srv.ResetCounts()
	if _, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "capped"), Service: svc("ci", "new")}); err != nil {
		t.Fatal(err)
	}
	// The Service's own reservations (a pool IPAM chooses in keeps no
	// index), the namespace's before the booking and after it (the
	// confirmation), the booking: one page each (50 IPs), where the
	// cluster's on the network are 41.
	if got := e.Calls(countedOps...); got != "ListIPs=3 BookIP=1 UpdateIP=0 GetIP=0 ReleaseIP=0" {
		t.Fatalf("calls with %d reservations of other namespaces: %s", others, got)
	}
}

// TestShareHoldsForALostBookingTakenBack: namespace ci holds its share of
// 2 with live Services when a booking of ci/c whose answer was lost (its
// admission failed, the booking stayed) is found by ci/c's retry. Taken
// back, it would give the namespace a third address; it counts like a new
// booking, and is left to the sweeper's pending grace.
func TestShareHoldsForALostBookingTakenBack(t *testing.T) {
	ctx := context.Background()
	r := refs{}
	e, a := allocEnv(t, r)
	p := pool(t, a, "auto")
	two := 2
	p.MaxPerNamespace = &two
	for _, name := range []string{"a", "b"} {
		res, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("ci", name)})
		if err != nil {
			t.Fatal(err)
		}
		r[res.ID] = svc("ci", name)
	}
	// The lost answer's booking: the newest of the namespace's.
	lost, err := e.Cloud.BookIP(ctx, scaleway.BookRequest{PrivateNetworkID: p.PrivateNetworkID,
		Tags: ipam.Entry{Cluster: "test", Pool: "auto", Service: svc("ci", "c")}.Tags()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("ci", "c")})
	if err == nil {
		t.Fatalf("ci/c was given %s (the lost booking %s): namespace ci holds 3 of its share of 2", res.ID, lost.ID)
	}
	if ipam.ReasonOf(err) != ipam.ReasonYielding {
		t.Fatalf("Reserve: %v, want a retryable refusal while the booking nobody holds settles", err)
	}
	held, err := a.room.holdings(ctx, ipam.Request{Pool: p, Service: svc("ci", "c")})
	if err != nil || len(held) != 3 {
		t.Fatalf("holdings %d, %v: the lost booking must stay for the sweeper", len(held), err)
	}
}
