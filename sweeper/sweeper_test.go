package sweeper

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// world is cluster prod (fixtures.ProdWorld) with the sweeper's helpers.
type world struct{ *fixtures.World }

// newWorld is cluster prod, with pools beside its own.
func newWorld(t testing.TB, pools ...string) *world {
	t.Helper()
	return &world{fixtures.ProdWorld(t, pools...)}
}

func (w *world) sweeper(mod ...func(*Options)) *Sweeper {
	o := Options{Cloud: w.Cloud, Config: func() *ipam.Config { return w.Cfg }, Services: w.Kube, Clock: w.Clock, Log: logr.Discard(), Recorder: &events{}}
	for _, m := range mod {
		m(&o)
	}
	return New(o)
}

// book reserves an IP as an admission would.
func (w *world) book(pool, ns, name string) *ipam.Grant {
	w.T.Helper()
	return w.Book(fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, Clock: w.Clock, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}})), pool, ns, name)
}

// sweep runs one cycle and checks invariant 2: every IP a live Service
// references still exists.
func (w *world) sweep(s *Sweeper) Report {
	w.T.Helper()
	return fixtures.Swept(w.World, s.Sweep)
}

type events struct{ list []string }

func (e *events) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	svc := regarding.(*corev1.Service)
	e.list = append(e.list, fmt.Sprintf("%s %s %s/%s: %s", eventtype, reason, svc.Namespace, svc.Name, fmt.Sprintf(note, args...)))
}

func TestLifecycle(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper()
	r := w.book("dc-link", "payments", "api")
	svc := w.Live("payments", "api", r.ID)

	rep := w.sweep(s)
	if rep.Backfilled != 1 || w.Entry(r.ID).UID != string(svc.UID) {
		t.Fatalf("uid not back-filled: %+v %+v", rep, w.Entry(r.ID))
	}

	w.Remove(svc)
	// The CCM still has the LB attached.
	if err := w.Srv.Attach(r.ID, emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "api-lb"}); err != nil {
		t.Fatal(err)
	}
	rep = w.sweep(s)
	if rep.Tagged != 1 || !w.Entry(r.ID).OrphanedSince.Equal(w.Clock.Now()) {
		t.Fatalf("not tagged orphaned: %+v", rep)
	}
	w.Clock.Step(23 * time.Hour)
	if rep = w.sweep(s); len(rep.Released) != 0 {
		t.Fatal("released within retention")
	}
	w.Clock.Step(2 * time.Hour)
	if rep = w.sweep(s); len(rep.Released) != 0 || !w.Exists(r.ID) {
		t.Fatal("released while attached")
	}
	if err := w.Srv.Detach(r.ID); err != nil {
		t.Fatal(err)
	}
	if rep = w.sweep(s); len(rep.Released) != 1 || w.Exists(r.ID) {
		t.Fatalf("not released after retention and detach: %+v", rep)
	}
}

func TestAdmissionLeakReclaimedAfterPendingGrace(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper(func(o *Options) { o.PendingGrace = 10 * time.Minute })
	r := w.book("dc-link", "payments", "never-created") // pool retention is 24h
	w.sweep(s)
	w.Clock.Step(9 * time.Minute)
	if rep := w.sweep(s); len(rep.Released) != 0 {
		t.Fatal("released within the pending grace")
	}
	w.Clock.Step(2 * time.Minute)
	if rep := w.sweep(s); len(rep.Released) != 1 || w.Exists(r.ID) {
		t.Fatalf("leak not reclaimed: %+v", rep)
	}
}

func TestReportOnlyReleasesNothing(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper(func(o *Options) { o.ReportOnly = true })
	r := w.book("general", "payments", "gone")
	w.sweep(s)
	w.Clock.Step(48 * time.Hour)
	rep := w.sweep(s)
	if len(rep.Released) != 0 || len(rep.WouldRelease) != 1 || !w.Exists(r.ID) {
		t.Fatalf("report-only: %+v", rep)
	}
}

func TestCapPerCycle(t *testing.T) {
	w := newWorld(t)
	reg := prometheus.NewRegistry()
	s := w.sweeper(func(o *Options) { o.MaxReleasesPerCycle = 2; o.Metrics = NewMetrics(reg) })
	for i := range 5 {
		w.book("general", "payments", fmt.Sprint("gone-", i))
	}
	w.sweep(s)
	w.Clock.Step(2 * time.Hour)
	rep := w.sweep(s)
	if len(rep.Released) != 2 || len(rep.WouldRelease) != 3 || len(w.Srv.IPs()) != 3 {
		t.Fatalf("cap: %+v", rep)
	}
	// What a cycle held back is a gauge of that cycle, not a running sum:
	// the same IPs are held back cycle after cycle.
	if got := testutil.ToFloat64(s.o.Metrics.would); got != 3 {
		t.Fatalf("scw_lb_ipam_sweeper_would_release %v after the first capped cycle, want 3", got)
	}
	if rep = w.sweep(s); len(rep.Released) != 2 || len(w.Srv.IPs()) != 1 {
		t.Fatalf("second cycle: %+v", rep)
	}
	if got := testutil.ToFloat64(s.o.Metrics.would); got != 1 {
		t.Fatalf("scw_lb_ipam_sweeper_would_release %v after the second capped cycle, want 1", got)
	}
	if got := testutil.ToFloat64(s.o.Metrics.releases); got != 4 {
		t.Fatalf("scw_lb_ipam_sweeper_releases_total %v, want 4", got)
	}
}

func TestForeignAndBringYourOwnUntouched(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper()
	edge := w.PNs["edge"].ID
	foreign, _ := w.Srv.AddIP(edge, netip.MustParseAddr("10.10.9.1"), []string{"terraform"}, nil)
	otherCluster, _ := w.Srv.AddIP(edge, netip.MustParseAddr("10.10.9.2"), ipam.Entry{Cluster: "staging", Pool: "general", Service: types.NamespacedName{Namespace: "a", Name: "b"}}.Tags(), nil)
	// Carries our cluster tag but not the marker: not ours either.
	lookalike, _ := w.Srv.AddIP(edge, netip.MustParseAddr("10.10.9.3"), []string{ipam.TagCluster + "prod"}, nil)
	byoLive, _ := w.Srv.AddIP(edge, netip.MustParseAddr("10.10.9.4"), []string{"byo"}, nil)
	w.Live("payments", "byo", byoLive)
	before := map[string][]string{}
	for _, id := range []string{foreign, otherCluster, lookalike, byoLive} {
		ip, _ := w.Srv.IP(id)
		before[id] = ip.Tags
	}
	w.sweep(s)
	w.Clock.Step(30 * 24 * time.Hour)
	w.sweep(s)
	for id, tags := range before {
		ip, ok := w.Srv.IP(id)
		if !ok || !ipam.SameTags(ip.Tags, tags) {
			t.Fatalf("IP %s touched: exists=%v tags %v → %v", id, ok, tags, ip.Tags)
		}
	}
	for _, ev := range w.Srv.Audit() {
		if ev.Kind != emulator.AuditBook {
			t.Fatalf("the sweeper changed something: %+v", ev)
		}
	}
}

func TestUnsyncedCacheDoesNothing(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "gone")
	s := w.sweeper(func(o *Options) { o.Synced = func() bool { return false } })
	w.Srv.ResetCounts()
	if _, err := s.Sweep(context.Background()); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("err = %v", err)
	}
	w.Clock.Step(100 * time.Hour)
	if _, err := s.Sweep(context.Background()); !errors.Is(err, ErrNotSynced) {
		t.Fatal(err)
	}
	n := 0
	for _, c := range w.Srv.Counts() {
		n += c
	}
	if n != 0 || !w.Exists(r.ID) {
		t.Fatalf("%d API calls on an unsynced cache", n)
	}
}

func TestRestartKeepsRetentionClock(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "gone") // 1h retention, uid set below
	svc := w.Live("payments", "gone", r.ID)
	w.sweep(w.sweeper()) // back-fills the uid
	w.Remove(svc)
	w.sweep(w.sweeper())
	w.Clock.Step(59 * time.Minute)
	if rep := w.sweep(w.sweeper()); len(rep.Released) != 0 {
		t.Fatal("a new sweeper restarted nothing: it released early")
	}
	w.Clock.Step(2 * time.Minute)
	if rep := w.sweep(w.sweeper()); len(rep.Released) != 1 {
		t.Fatalf("a new sweeper lost the clock: %+v", rep)
	}
}

func TestSharedIPReportedNeverReleased(t *testing.T) {
	w := newWorld(t)
	ev := &events{}
	s := w.sweeper(func(o *Options) { o.Recorder = ev })
	r := w.book("general", "payments", "a")
	w.Live("payments", "a", r.ID)
	w.Live("payments", "b", r.ID)
	rep := w.sweep(s)
	w.Clock.Step(100 * time.Hour)
	w.sweep(s)
	if rep.Shared != 1 || len(ev.list) < 2 || !strings.Contains(ev.list[0], "IPSharedByServices payments/a") || !strings.Contains(ev.list[0], "referenced by 2 Services (payments/a, payments/b)") {
		t.Fatalf("report %+v events %v", rep, ev.list)
	}
	if !w.Exists(r.ID) {
		t.Fatal("released a shared IP")
	}
}

func TestRemovedPoolKeptUnlessAllowed(t *testing.T) {
	w := newWorld(t)
	r := w.book("dc-link", "payments", "gone")
	svc := w.Live("payments", "gone", r.ID)
	w.sweep(w.sweeper())
	w.Remove(svc)
	// dc-link leaves the pool file, and with it the only pool on its
	// network: the IP is out of scope, left alone and reported.
	w.Cfg.Pools = w.Cfg.Pools[1:]
	if rep := w.sweep(w.sweeper()); rep.OutOfScope != 1 || rep.Tagged != 0 {
		t.Fatalf("an out-of-scope IP was touched: %+v", rep)
	}
	w.Clock.Step(48 * time.Hour)
	if rep := w.sweep(w.sweeper()); len(rep.Released) != 0 {
		t.Fatal("released a removed pool's IP without permission")
	}
	// With permission it is handled as a removed pool's: the retention
	// clock starts, then it is released.
	allowed := w.sweeper(func(o *Options) { o.ReleaseRemovedPools = true })
	if rep := w.sweep(allowed); rep.Tagged != 1 {
		t.Fatalf("not tagged orphaned with permission: %+v", rep)
	}
	w.Clock.Step(ipam.DefaultRetention + time.Second)
	if rep := w.sweep(allowed); len(rep.Released) != 1 {
		t.Fatalf("not released with permission: %+v", rep)
	}
}

// Finding 8: the sweeper lists by the cluster's name, which is a tag, not a
// proof. Another cluster named the same on other networks has retained
// reservations of a pool with our pool's name: they are left alone.
func TestSameClusterNameOnOtherNetworksIsLeftAlone(t *testing.T) {
	w := newWorld(t)
	tags := ipam.Entry{Cluster: "prod", Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: "theirs"}, UID: "uid-theirs",
		OrphanedSince: w.Clock.Now().Add(-100 * time.Hour)}.Tags()
	theirs, err := w.Srv.AddIP(w.PNs["nodes"].ID, netip.MustParseAddr("172.16.0.50"), tags, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := w.sweep(w.sweeper())
	if !w.Exists(theirs) || rep.OutOfScope != 1 || rep.Tagged+rep.Untagged+rep.Backfilled != 0 || len(rep.Released) != 0 {
		t.Fatalf("another cluster's IP was acted on: %+v", rep)
	}
	if ip, _ := w.Srv.IP(theirs); !ipam.SameTags(ip.Tags, tags) {
		t.Fatalf("its tags changed: %v", ip.Tags)
	}
}

// The cycle reads the listing page by page and releases only once the
// listing has ended: a release while paging would shift the pages still to
// come, and the cycle would miss reservations (here 250 over three pages,
// all past their retention).
func TestCycleReleasesAfterTheListing(t *testing.T) {
	w := newWorld(t)
	w.retained(250)
	w.Clock.Step(2 * time.Hour)
	rep := w.sweep(w.sweeper(func(o *Options) { o.MaxReleasesPerCycle = 1000 }))
	if rep.Scanned != 250 || len(rep.Released) != 250 || rep.Errors != 0 {
		t.Fatalf("scanned %d, released %d, errors %d; want 250, 250, 0", rep.Scanned, len(rep.Released), rep.Errors)
	}
	if n := len(w.Srv.IPs()); n != 0 {
		t.Fatalf("%d reservations left", n)
	}
}

// noList fails every List: a cycle given the informer's store must not
// list (and copy) the Services.
type noList struct{ client.Reader }

func (noList) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("listed the Services instead of reading the store")
}

// With the informer's store, the cycle reads the Services there in place:
// the same live view as through a List.
func TestCycleReadsTheServiceStore(t *testing.T) {
	w := newWorld(t)
	kept, gone := w.book("general", "payments", "api"), w.book("general", "payments", "old")
	svc := w.Live("payments", "api", kept.ID)
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := store.Add(servicecache.NewRecord(svc)); err != nil {
		t.Fatal(err)
	}
	rep := w.sweep(w.sweeper(func(o *Options) { o.Services, o.ServiceStore = noList{w.Kube}, store }))
	if rep.Scanned != 2 || rep.Referenced != 1 || rep.Tagged != 1 || rep.Backfilled != 1 {
		t.Fatalf("%+v", rep)
	}
	if !w.Entry(gone.ID).OrphanedSince.Equal(w.Clock.Now()) || w.Entry(kept.ID).UID != string(svc.UID) {
		t.Fatalf("ledger: kept %+v, gone %+v", w.Entry(kept.ID), w.Entry(gone.ID))
	}
}

// TestStartNeverWakesForThePast: a release-at older than orphaned-since
// (a rollback across the version that added the tag, a hand edit) and a
// release that is due but cannot happen (still attached) are no reason
// to run another cycle: the loop wakes for releases in the future only.
// Each listing costs the API key every webhook uses.
func TestStartNeverWakesForThePast(t *testing.T) {
	w := newWorld(t)
	now := time.Now()
	add := func(name string, e ipam.Entry, attach bool) string {
		t.Helper()
		e.Cluster, e.Pool, e.Service, e.UID = w.Cfg.ClusterName, "general", types.NamespacedName{Namespace: "payments", Name: name}, "uid-"+name
		id, err := w.Srv.AddIP(w.PNs["edge"].ID, netip.Addr{}, e.Tags(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if attach {
			if err := w.Srv.Attach(id, emulator.Resource{Type: "lb_server", ID: "lb-" + name, Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	stale := add("stale", ipam.Entry{OrphanedSince: now.Add(-10 * time.Minute), ReleaseAt: now.Add(-time.Hour)}, false)
	add("attached", ipam.Entry{OrphanedSince: now.Add(-2 * time.Hour), ReleaseAt: now.Add(-time.Hour)}, true)
	s := w.sweeper(func(o *Options) {
		o.Clock, o.Interval, o.Margin = clock.RealClock{}, time.Hour, 20*time.Second
	})
	w.Srv.ResetCounts()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.Srv.Counts()[emulator.OpListIPs]; n != 1 {
		t.Fatalf("%d listings in 2 s with a one-hour interval; want the first cycle's only", n)
	}
	// The stale one now has a time, at least the margin away, and was not
	// released.
	if e := w.Entry(stale); !w.Exists(stale) || e.ReleaseAt.Before(now.Add(20*time.Second)) || !e.Complete() {
		t.Fatalf("the stale release time became %v (orphaned-since %v)", e.ReleaseAt, e.OrphanedSince)
	}
}

// TestReleaseTimeFollowsThePoolFile: the operator lengthens a pool's
// retention after a reservation was retained under the old one: the next
// cycle moves its release-at later, so the re-create two hours on gets
// its address back. Shortened, it moves earlier, but never into the dead
// zone of an admission that read the old time; a release a full pool
// brought forward stays where it is.
func TestReleaseTimeFollowsThePoolFile(t *testing.T) {
	w := newWorld(t)
	const margin = 20 * time.Second
	sweeper := func() *Sweeper { return w.sweeper(func(o *Options) { o.Margin = margin }) }
	retain := func(name string) (string, time.Time) {
		t.Helper()
		r := w.book("general", "payments", name)
		live := w.Live("payments", name, r.ID)
		w.sweep(sweeper())
		w.Remove(live)
		w.sweep(sweeper())
		e := w.Entry(r.ID)
		return r.ID, e.OrphanedSince
	}
	p, _ := w.Cfg.Pool("general") // 1h
	x, orphaned := retain("x")
	y, _ := retain("y")
	// A full pool brought y's release forward.
	policy := ipam.Retention{Margin: margin}
	if _, err := w.Cloud.SetTags(context.Background(), y, policy.Yield(w.Entry(y), w.Clock.Now().Add(time.Minute)).Tags()); err != nil {
		t.Fatal(err)
	}
	yBefore := w.Entry(y).ReleaseAt

	p.Retention.Duration = 24 * time.Hour
	w.sweep(sweeper())
	if at := w.Entry(x).ReleaseAt; !at.Equal(orphaned.Add(24 * time.Hour)) {
		t.Fatalf("after the pool's retention went to 24h, release-at %v, want %v", at, orphaned.Add(24*time.Hour))
	}
	if at := w.Entry(y).ReleaseAt; !at.Equal(yBefore) || !w.Entry(y).Early {
		t.Fatalf("the early release moved to %v (was %v)", at, yBefore)
	}
	w.Clock.Step(2 * time.Hour)
	reader := ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: margin}
	if !reader.Reusable(p, w.Entry(x), w.Clock.Now()) {
		t.Fatal("two hours on, the reservation is not reusable under the 24h retention")
	}

	// Shortened to 30 minutes, two hours after orphaning: due at once by
	// the pool file, written no sooner than the margin from now.
	p.Retention.Duration = 30 * time.Minute
	w.sweep(sweeper())
	if at, want := w.Entry(x).ReleaseAt, w.Clock.Now().Add(margin); at.Before(want) || at.After(want.Add(time.Second)) {
		t.Fatalf("after the pool's retention went to 30m, release-at %v, want the margin from now (%v)", at, want)
	}
	if !w.Exists(x) {
		t.Fatal("released inside the margin of the time an admission may have read")
	}
	w.Clock.Step(margin + time.Second)
	if rep := w.sweep(sweeper()); !slices.Contains(rep.Released, x) {
		t.Fatalf("not released once the moved release time passed: %+v", rep)
	}
}

// TestLedgerBackfillIsSpreadOverCycles: after an upgrade, every
// reservation lacks release-at and the namespace tag; a cycle writes at
// most MaxLedgerWritesPerCycle of them, the next ones the rest.
func TestLedgerBackfillIsSpreadOverCycles(t *testing.T) {
	w := newWorld(t)
	n := MaxLedgerWritesPerCycle + 30
	for i := range n {
		// Written by an older version: neither release-at nor the
		// namespace tag (dropped from the tags here).
		e := ipam.Entry{Cluster: w.Cfg.ClusterName, Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: fmt.Sprint("old-", i)},
			UID: "u", OrphanedSince: w.Clock.Now().Add(-time.Minute)}
		tags := slices.DeleteFunc(e.Tags(), func(t string) bool { return strings.HasPrefix(t, ipam.TagNamespace) })
		if _, err := w.Srv.AddIP(w.PNs["edge"].ID, netip.Addr{}, tags, nil); err != nil {
			t.Fatal(err)
		}
	}
	first := w.sweep(w.sweeper())
	second := w.sweep(w.sweeper())
	if first.Settled != MaxLedgerWritesPerCycle || first.LedgerDeferred != 30 || second.Settled != 30 || second.LedgerDeferred != 0 {
		t.Fatalf("settled %d then %d, deferred %d then %d; want %d then 30, 30 then 0",
			first.Settled, second.Settled, first.LedgerDeferred, second.LedgerDeferred, MaxLedgerWritesPerCycle)
	}
	if third := w.sweep(w.sweeper()); third.Settled != 0 {
		t.Fatalf("a third cycle rewrote %d ledgers", third.Settled)
	}
}

// TestCycleReconcilesTheNamespaceTag: a Gateway's reservation tagged with
// its controller's namespace (booked before gatewayControllers named the
// controller, or back-filled from the Service tag) is re-tagged by the
// cycle with the namespace its live Service is judged by, so that it counts
// in that namespace's share; a second cycle writes nothing.
func TestCycleReconcilesTheNamespaceTag(t *testing.T) {
	w := newWorld(t)
	const label = "gateway.envoyproxy.io/owning-gateway-namespace"
	w.Cfg.GatewayControllers = []ipam.GatewayController{{Namespace: "envoy-gateway-system", GatewayNamespaceLabel: label}}
	r := w.book("dc-link", "envoy-gateway-system", "envoy-payments-web")
	svc := fixtures.Service("envoy-gateway-system", "envoy-payments-web", map[string]string{ccm.AnnotationPrivateIPIDs: r.ID})
	svc.Labels = map[string]string{label: "payments"}
	if err := w.Kube.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	if got := w.Entry(r.ID).JudgedNamespace(); got != "envoy-gateway-system" {
		t.Fatalf("booked with namespace tag %q", got)
	}
	w.sweep(w.sweeper())
	if got := w.Entry(r.ID).JudgedNamespace(); got != "payments" {
		t.Fatalf("namespace tag %q after a cycle, want payments (the Gateway's)", got)
	}
	w.Srv.ResetCounts()
	w.sweep(w.sweeper())
	if n := w.Srv.Count(emulator.OpUpdateIP); n != 0 {
		t.Fatalf("%d writes in the next cycle", n)
	}
}

// TestStrandedReservationReported: a reservation no live Service
// references that stays attached to a Load Balancer past the convergence
// grace is one the CCM did not let go (its Service gone, the Load Balancer
// left behind, or a move it never detached): the sweeper never releases an
// attached IP, so it reports it, and no sooner than the grace.
func TestStrandedReservationReported(t *testing.T) {
	w := newWorld(t)
	r := w.book("dc-link", "payments", "gone")
	if err := w.Srv.Attach(r.ID, emulator.Resource{Type: "lb_server", ID: "8c2f4b9a-51e1-4d7e-9c0b-2f5e6a7b8c9d", Name: "payments-gone"}); err != nil {
		t.Fatal(err)
	}
	s := w.sweeper()
	if rep := w.sweep(s); rep.Stranded != 0 {
		t.Fatalf("just orphaned: %d stranded", rep.Stranded)
	}
	w.Clock.Step(DefaultConvergenceGrace - time.Second)
	if rep := w.sweep(s); rep.Stranded != 0 {
		t.Fatalf("within the grace: %d stranded", rep.Stranded)
	}
	w.Clock.Step(2 * time.Second)
	if rep := w.sweep(s); rep.Stranded != 1 || len(rep.Released) != 0 {
		t.Fatalf("past the grace: %d stranded, released %v; want 1, none", rep.Stranded, rep.Released)
	}
}
