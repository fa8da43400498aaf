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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// world is an emulator, a pool file, a Service cache and a clock.
type world struct {
	t     testing.TB
	srv   *scalewaytest.Server
	cloud scaleway.Cloud
	cfg   *ipam.Config
	kube  client.Client
	clock *clocktesting.FakeClock
	pns   map[string]scalewaytest.PrivateNetwork
}

func newWorld(t testing.TB) *world { t.Helper(); return newWorldWith(t, "") }

// newWorldWith is newWorld with more pools in the pool file.
func newWorldWith(t testing.TB, pools string) *world {
	t.Helper()
	w := &world{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC))}
	w.srv, w.pns = fixtures.Emulator(t, scalewaytest.Options{SecretKey: scalewaytest.TestSecretKey}, "nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/16")
	file := localrun.PoolFile("clusterName: prod\nregion: fr-par\nclusterPrivateNetworkID: {{nodes}}\npools:\n"+
		"  - {name: dc-link, privateNetworkID: {{dc}}, ranges: [172.16.35.200-172.16.35.250], retention: 24h}\n"+
		"  - {name: general, privateNetworkID: {{edge}}, default: true, retention: 1h}\n"+pools, w.pns)
	w.cloud = fixtures.Cloud(t, w.srv, scaleway.Options{Backoff: wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Steps: 3}})
	var err error
	if w.cfg, err = ipam.ParseConfig([]byte(file)); err != nil {
		t.Fatal(err)
	}
	if err := w.cfg.Resolve(context.Background(), w.cloud); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	w.kube = fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{request.LabelEnabled: "true"}}}).
		Build()
	return w
}

func (w *world) sweeper(mod ...func(*Options)) *Sweeper {
	o := Options{Cloud: w.cloud, Config: func() *ipam.Config { return w.cfg }, Services: w.kube, Clock: w.clock, Log: logr.Discard(), Recorder: &events{}}
	for _, m := range mod {
		m(&o)
	}
	return New(o)
}

// book reserves an IP as an admission would.
func (w *world) book(pool, ns, name string) *ipam.Reservation {
	w.t.Helper()
	p, _ := w.cfg.Pool(pool)
	a := allocator.New(allocator.Options{Cloud: w.cloud, Config: w.cfg, Clock: w.clock})
	r, err := a.Reserve(context.Background(), ipam.Request{Pool: p, Service: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// usedThenRetained books an IP in pool for svc, lets the sweeper see a
// live Service use it (uid back-filled), deletes the Service and lets the
// sweeper retain it (orphaned-since and release-at set).
func (w *world) usedThenRetained(pool string, svc types.NamespacedName) *ipam.Reservation {
	w.t.Helper()
	x := w.book(pool, svc.Namespace, svc.Name)
	live := w.live(svc.Namespace, svc.Name, x.ID)
	w.sweep(w.sweeper())
	w.remove(live)
	w.sweep(w.sweeper())
	return x
}

// live creates a LoadBalancer Service referencing ids.
func (w *world) live(ns, name string, ids ...string) *corev1.Service {
	w.t.Helper()
	svc := fixtures.Service(ns, name, map[string]string{ccm.AnnotationPrivateIPIDs: strings.Join(ids, ",")})
	svc.UID = types.UID(fmt.Sprintf("uid-%s-%s-%d", ns, name, w.clock.Now().Unix()))
	if err := w.kube.Create(context.Background(), svc); err != nil {
		w.t.Fatal(err)
	}
	return svc
}

func (w *world) remove(svc *corev1.Service) {
	w.t.Helper()
	if err := w.kube.Delete(context.Background(), svc); err != nil {
		w.t.Fatal(err)
	}
}

// sweep runs one cycle and checks invariant 2: every IP a live Service
// references still exists.
func (w *world) sweep(s *Sweeper) Report {
	w.t.Helper()
	rep, err := s.Sweep(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	w.checkReferencedKept()
	return rep
}

func (w *world) checkReferencedKept() {
	w.t.Helper()
	var list corev1.ServiceList
	if err := w.kube.List(context.Background(), &list); err != nil {
		w.t.Fatal(err)
	}
	for i := range list.Items {
		if !ccm.Live(&list.Items[i]) {
			continue
		}
		for _, id := range ccm.ReferencedIDs(&list.Items[i]) {
			if _, ok := w.srv.IP(id); !ok {
				w.t.Fatalf("invariant 2 broken: IP %s of live Service %s/%s was released", id, list.Items[i].Namespace, list.Items[i].Name)
			}
		}
	}
}

func (w *world) entry(id string) ipam.Entry {
	w.t.Helper()
	ip, ok := w.srv.IP(id)
	if !ok {
		w.t.Fatalf("IP %s is gone", id)
	}
	e, _ := ipam.ParseEntry(ip.Tags)
	return e
}

func (w *world) exists(id string) bool { _, ok := w.srv.IP(id); return ok }

type events struct{ list []string }

func (e *events) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	svc := regarding.(*corev1.Service)
	e.list = append(e.list, fmt.Sprintf("%s %s %s/%s: %s", eventtype, reason, svc.Namespace, svc.Name, fmt.Sprintf(note, args...)))
}

func TestLifecycle(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper()
	r := w.book("dc-link", "payments", "api")
	svc := w.live("payments", "api", r.ID)

	rep := w.sweep(s)
	if rep.Backfilled != 1 || w.entry(r.ID).UID != string(svc.UID) {
		t.Fatalf("uid not back-filled: %+v %+v", rep, w.entry(r.ID))
	}

	w.remove(svc)
	// The CCM still has the LB attached.
	if err := w.srv.Attach(r.ID, scalewaytest.Resource{Type: "lb_server", ID: "lb-1", Name: "api-lb"}); err != nil {
		t.Fatal(err)
	}
	rep = w.sweep(s)
	if rep.Tagged != 1 || !w.entry(r.ID).OrphanedSince.Equal(w.clock.Now()) {
		t.Fatalf("not tagged orphaned: %+v", rep)
	}
	w.clock.Step(23 * time.Hour)
	if rep = w.sweep(s); len(rep.Released) != 0 {
		t.Fatal("released within retention")
	}
	w.clock.Step(2 * time.Hour)
	if rep = w.sweep(s); len(rep.Released) != 0 || !w.exists(r.ID) {
		t.Fatal("released while attached")
	}
	if err := w.srv.Detach(r.ID); err != nil {
		t.Fatal(err)
	}
	if rep = w.sweep(s); len(rep.Released) != 1 || w.exists(r.ID) {
		t.Fatalf("not released after retention and detach: %+v", rep)
	}
}

func TestAdmissionLeakReclaimedAfterPendingGrace(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper(func(o *Options) { o.PendingGrace = 10 * time.Minute })
	r := w.book("dc-link", "payments", "never-created") // pool retention is 24h
	w.sweep(s)
	w.clock.Step(9 * time.Minute)
	if rep := w.sweep(s); len(rep.Released) != 0 {
		t.Fatal("released within the pending grace")
	}
	w.clock.Step(2 * time.Minute)
	if rep := w.sweep(s); len(rep.Released) != 1 || w.exists(r.ID) {
		t.Fatalf("leak not reclaimed: %+v", rep)
	}
}

func TestReportOnlyReleasesNothing(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper(func(o *Options) { o.ReportOnly = true })
	r := w.book("general", "payments", "gone")
	w.sweep(s)
	w.clock.Step(48 * time.Hour)
	rep := w.sweep(s)
	if len(rep.Released) != 0 || len(rep.WouldRelease) != 1 || !w.exists(r.ID) {
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
	w.clock.Step(2 * time.Hour)
	rep := w.sweep(s)
	if len(rep.Released) != 2 || len(rep.WouldRelease) != 3 || len(w.srv.IPs()) != 3 {
		t.Fatalf("cap: %+v", rep)
	}
	// What a cycle held back is a gauge of that cycle, not a running sum:
	// the same IPs are held back cycle after cycle.
	if got := testutil.ToFloat64(s.o.Metrics.would); got != 3 {
		t.Fatalf("scw_lb_ipam_sweeper_would_release %v after the first capped cycle, want 3", got)
	}
	if rep = w.sweep(s); len(rep.Released) != 2 || len(w.srv.IPs()) != 1 {
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
	edge := w.pns["edge"].ID
	foreign, _ := w.srv.AddIP(edge, netip.MustParseAddr("10.10.9.1"), []string{"terraform"}, nil)
	otherCluster, _ := w.srv.AddIP(edge, netip.MustParseAddr("10.10.9.2"), ipam.Entry{Cluster: "staging", Pool: "general", Service: types.NamespacedName{Namespace: "a", Name: "b"}}.Tags(), nil)
	// Carries our cluster tag but not the marker: not ours either.
	lookalike, _ := w.srv.AddIP(edge, netip.MustParseAddr("10.10.9.3"), []string{ipam.TagCluster + "prod"}, nil)
	byoLive, _ := w.srv.AddIP(edge, netip.MustParseAddr("10.10.9.4"), []string{"byo"}, nil)
	w.live("payments", "byo", byoLive)
	before := map[string][]string{}
	for _, id := range []string{foreign, otherCluster, lookalike, byoLive} {
		ip, _ := w.srv.IP(id)
		before[id] = ip.Tags
	}
	w.sweep(s)
	w.clock.Step(30 * 24 * time.Hour)
	w.sweep(s)
	for id, tags := range before {
		ip, ok := w.srv.IP(id)
		if !ok || !ipam.SameTags(ip.Tags, tags) {
			t.Fatalf("IP %s touched: exists=%v tags %v → %v", id, ok, tags, ip.Tags)
		}
	}
	for _, ev := range w.srv.Audit() {
		if ev.Kind != scalewaytest.AuditBook {
			t.Fatalf("the sweeper changed something: %+v", ev)
		}
	}
}

func TestUnsyncedCacheDoesNothing(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "gone")
	s := w.sweeper(func(o *Options) { o.Synced = func() bool { return false } })
	w.srv.ResetCounts()
	if _, err := s.Sweep(context.Background()); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("err = %v", err)
	}
	w.clock.Step(100 * time.Hour)
	if _, err := s.Sweep(context.Background()); !errors.Is(err, ErrNotSynced) {
		t.Fatal(err)
	}
	n := 0
	for _, c := range w.srv.Counts() {
		n += c
	}
	if n != 0 || !w.exists(r.ID) {
		t.Fatalf("%d API calls on an unsynced cache", n)
	}
}

func TestRestartKeepsRetentionClock(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "gone") // 1h retention, uid set below
	svc := w.live("payments", "gone", r.ID)
	w.sweep(w.sweeper()) // back-fills the uid
	w.remove(svc)
	w.sweep(w.sweeper())
	w.clock.Step(59 * time.Minute)
	if rep := w.sweep(w.sweeper()); len(rep.Released) != 0 {
		t.Fatal("a new sweeper restarted nothing: it released early")
	}
	w.clock.Step(2 * time.Minute)
	if rep := w.sweep(w.sweeper()); len(rep.Released) != 1 {
		t.Fatalf("a new sweeper lost the clock: %+v", rep)
	}
}

func TestSharedIPReportedNeverReleased(t *testing.T) {
	w := newWorld(t)
	ev := &events{}
	s := w.sweeper(func(o *Options) { o.Recorder = ev })
	r := w.book("general", "payments", "a")
	w.live("payments", "a", r.ID)
	w.live("payments", "b", r.ID)
	rep := w.sweep(s)
	w.clock.Step(100 * time.Hour)
	w.sweep(s)
	if rep.Shared != 1 || len(ev.list) < 2 || !strings.Contains(ev.list[0], "IPSharedByServices payments/a") || !strings.Contains(ev.list[0], "referenced by 2 Services (payments/a, payments/b)") {
		t.Fatalf("report %+v events %v", rep, ev.list)
	}
	if !w.exists(r.ID) {
		t.Fatal("released a shared IP")
	}
}

func TestRemovedPoolKeptUnlessAllowed(t *testing.T) {
	w := newWorld(t)
	r := w.book("dc-link", "payments", "gone")
	svc := w.live("payments", "gone", r.ID)
	w.sweep(w.sweeper())
	w.remove(svc)
	// dc-link leaves the pool file, and with it the only pool on its
	// network: the IP is out of scope, left alone and reported.
	w.cfg.Pools = w.cfg.Pools[1:]
	if rep := w.sweep(w.sweeper()); rep.OutOfScope != 1 || rep.Tagged != 0 {
		t.Fatalf("an out-of-scope IP was touched: %+v", rep)
	}
	w.clock.Step(48 * time.Hour)
	if rep := w.sweep(w.sweeper()); len(rep.Released) != 0 {
		t.Fatal("released a removed pool's IP without permission")
	}
	// With permission it is handled as a removed pool's: the retention
	// clock starts, then it is released.
	allowed := w.sweeper(func(o *Options) { o.ReleaseRemovedPools = true })
	if rep := w.sweep(allowed); rep.Tagged != 1 {
		t.Fatalf("not tagged orphaned with permission: %+v", rep)
	}
	w.clock.Step(ipam.DefaultRetention + time.Second)
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
		OrphanedSince: w.clock.Now().Add(-100 * time.Hour)}.Tags()
	theirs, err := w.srv.AddIP(w.pns["nodes"].ID, netip.MustParseAddr("172.16.0.50"), tags, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := w.sweep(w.sweeper())
	if !w.exists(theirs) || rep.OutOfScope != 1 || rep.Tagged+rep.Untagged+rep.Backfilled != 0 || len(rep.Released) != 0 {
		t.Fatalf("another cluster's IP was acted on: %+v", rep)
	}
	if ip, _ := w.srv.IP(theirs); !ipam.SameTags(ip.Tags, tags) {
		t.Fatalf("its tags changed: %v", ip.Tags)
	}
}

// racingCloud changes an IP's tags right before the sweeper re-reads it,
// as an admission taking it back would.
type racingCloud struct {
	scaleway.Cloud
	before func(id string)
}

func (c racingCloud) GetIP(ctx context.Context, id string) (*scaleway.IP, error) {
	c.before(id)
	return c.Cloud.GetIP(ctx, id)
}

// TestReleaseSkippedWhenTagsChanged: the re-read before a release is the
// second line of defence behind the release protocol, for a replica whose
// clock runs behind: its admission still takes the IP back, and the
// sweeper, seeing the tags changed, does not release it.
func TestReleaseSkippedWhenTagsChanged(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "api")
	w.sweep(w.sweeper())
	skewed := clocktesting.NewFakeClock(w.clock.Now())
	w.clock.Step(2 * time.Hour)
	alloc := allocator.New(allocator.Options{Cloud: w.cloud, Config: w.cfg, Clock: skewed})
	s := w.sweeper(func(o *Options) {
		o.Cloud = racingCloud{Cloud: w.cloud, before: func(string) {
			p, _ := w.cfg.Pool("general")
			if _, err := alloc.Reserve(context.Background(), ipam.Request{Pool: p, Service: types.NamespacedName{Namespace: "payments", Name: "api"}}); err != nil {
				t.Fatal(err)
			}
		}}
	})
	if rep := w.sweep(s); len(rep.Released) != 0 || !w.exists(r.ID) {
		t.Fatal("released an IP taken back during the cycle")
	}
	if !w.entry(r.ID).OrphanedSince.IsZero() {
		t.Fatal("the reuse did not clear orphaned-since")
	}
}

// The cycle reads the listing page by page and releases only once the
// listing has ended: a release while paging would shift the pages still to
// come, and the cycle would miss reservations (here 250 over three pages,
// all past their retention).
func TestCycleReleasesAfterTheListing(t *testing.T) {
	w := newWorld(t)
	w.retained(250)
	w.clock.Step(2 * time.Hour)
	rep := w.sweep(w.sweeper(func(o *Options) { o.MaxReleasesPerCycle = 1000 }))
	if rep.Scanned != 250 || len(rep.Released) != 250 || rep.Errors != 0 {
		t.Fatalf("scanned %d, released %d, errors %d; want 250, 250, 0", rep.Scanned, len(rep.Released), rep.Errors)
	}
	if n := len(w.srv.IPs()); n != 0 {
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
	svc := w.live("payments", "api", kept.ID)
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := store.Add(ccm.NewRecord(svc)); err != nil {
		t.Fatal(err)
	}
	rep := w.sweep(w.sweeper(func(o *Options) { o.Services, o.ServiceStore = noList{w.kube}, store }))
	if rep.Scanned != 2 || rep.Referenced != 1 || rep.Tagged != 1 || rep.Backfilled != 1 {
		t.Fatalf("%+v", rep)
	}
	if !w.entry(gone.ID).OrphanedSince.Equal(w.clock.Now()) || w.entry(kept.ID).UID != string(svc.UID) {
		t.Fatalf("ledger: kept %+v, gone %+v", w.entry(kept.ID), w.entry(gone.ID))
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
		e.Cluster, e.Pool, e.Service, e.UID = w.cfg.ClusterName, "general", types.NamespacedName{Namespace: "payments", Name: name}, "uid-"+name
		id, err := w.srv.AddIP(w.pns["edge"].ID, netip.Addr{}, e.Tags(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if attach {
			if err := w.srv.Attach(id, scalewaytest.Resource{Type: "lb_server", ID: "lb-" + name, Name: name}); err != nil {
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
	w.srv.ResetCounts()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.srv.Counts()[scalewaytest.OpListIPs]; n != 1 {
		t.Fatalf("%d listings in 2 s with a one-hour interval; want the first cycle's only", n)
	}
	// The stale one now has a time, at least the margin away, and was not
	// released.
	if e := w.entry(stale); !w.exists(stale) || e.ReleaseAt.Before(now.Add(20*time.Second)) || !e.Complete() {
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
		live := w.live("payments", name, r.ID)
		w.sweep(sweeper())
		w.remove(live)
		w.sweep(sweeper())
		e := w.entry(r.ID)
		return r.ID, e.OrphanedSince
	}
	p, _ := w.cfg.Pool("general") // 1h
	x, orphaned := retain("x")
	y, _ := retain("y")
	// A full pool brought y's release forward.
	policy := ipam.Retention{Margin: margin}
	if _, err := w.cloud.SetTags(context.Background(), y, policy.Yield(w.entry(y), w.clock.Now().Add(time.Minute)).Tags()); err != nil {
		t.Fatal(err)
	}
	yBefore := w.entry(y).ReleaseAt

	p.Retention.Duration = 24 * time.Hour
	w.sweep(sweeper())
	if at := w.entry(x).ReleaseAt; !at.Equal(orphaned.Add(24 * time.Hour)) {
		t.Fatalf("after the pool's retention went to 24h, release-at %v, want %v", at, orphaned.Add(24*time.Hour))
	}
	if at := w.entry(y).ReleaseAt; !at.Equal(yBefore) || !w.entry(y).Early {
		t.Fatalf("the early release moved to %v (was %v)", at, yBefore)
	}
	w.clock.Step(2 * time.Hour)
	reader := ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: margin}
	if !reader.Reusable(p, w.entry(x), w.clock.Now()) {
		t.Fatal("two hours on, the reservation is not reusable under the 24h retention")
	}

	// Shortened to 30 minutes, two hours after orphaning: due at once by
	// the pool file, written no sooner than the margin from now.
	p.Retention.Duration = 30 * time.Minute
	w.sweep(sweeper())
	if at, want := w.entry(x).ReleaseAt, w.clock.Now().Add(margin); at.Before(want) || at.After(want.Add(time.Second)) {
		t.Fatalf("after the pool's retention went to 30m, release-at %v, want the margin from now (%v)", at, want)
	}
	if !w.exists(x) {
		t.Fatal("released inside the margin of the time an admission may have read")
	}
	w.clock.Step(margin + time.Second)
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
		e := ipam.Entry{Cluster: w.cfg.ClusterName, Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: fmt.Sprint("old-", i)},
			UID: "u", OrphanedSince: w.clock.Now().Add(-time.Minute)}
		tags := slices.DeleteFunc(e.Tags(), func(t string) bool { return strings.HasPrefix(t, ipam.TagNamespace) })
		if _, err := w.srv.AddIP(w.pns["edge"].ID, netip.Addr{}, tags, nil); err != nil {
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
