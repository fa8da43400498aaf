package sweeper

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/go-logr/logr"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// tiny is a pool of two addresses.
const tiny = "  - {name: tiny, privateNetworkID: {{dc}}, ranges: [172.16.35.251-172.16.35.252], retention: 24h}\n"

// bookingCloud gates BookIP too: a retry that books the address the
// sweeper is releasing.
type bookingCloud struct{ gatedCloud }

func (c bookingCloud) BookIP(ctx context.Context, r scaleway.BookRequest) (*scaleway.IP, error) {
	defer c.gate("BookIP")()
	return c.Cloud.BookIP(ctx, r)
}

// orders are every interleaving of two parties' steps, each party's own
// order kept.
func orders(a, b []string) [][]string {
	if len(a) == 0 || len(b) == 0 {
		return [][]string{append(slices.Clone(a), b...)}
	}
	var out [][]string
	for _, rest := range orders(a[1:], b) {
		out = append(out, append([]string{a[0]}, rest...))
	}
	for _, rest := range orders(a, b[1:]) {
		out = append(out, append([]string{b[0]}, rest...))
	}
	return out
}

// run makes the parties' calls through the schedule s at once and waits.
func run(s *schedule, parties map[string]func()) {
	var wg sync.WaitGroup
	for name, f := range parties {
		wg.Go(func() {
			defer s.finish(name)
			f()
		})
	}
	wg.Wait()
}

// TestEarlyReleaseEveryInterleaving drives the release brought forward by
// a full pool against a re-create taking the reservation back and the
// sweeper releasing it. Pool tiny has two addresses: X, retained for the
// deleted payments/api an hour ago, and Y, live. At T, an admission for
// ci/new finds the pool full and brings X's release forward (marker: its
// re-read and its write) while payments/api is re-created (admission: its
// read and its take-back), in every order. A margin later, the sweeper
// (its re-read and release) meets the re-create's retry (its read and its
// booking), in every order, when the first attempt was refused. In every
// case no ID handed out is released and no live Service loses its IP
// (invariant 2); and the protocol is not vacuous: some orders take X back,
// others release it early and book the retry anew.
func TestEarlyReleaseEveryInterleaving(t *testing.T) {
	const margin = 20 * time.Second
	first := orders([]string{"marker:GetIP", "marker:SetTags"}, []string{"admission:ListIPs", "admission:SetTags"})
	if len(first) != 6 {
		t.Fatalf("%d interleavings, want 6", len(first))
	}
	var takenBack, releasedEarly int
	for _, o1 := range first {
		for _, o2 := range orders([]string{"sweeper:GetIP", "sweeper:ReleaseIP"}, []string{"retry:ListIPs", "retry:BookIP"}) {
			t.Run(strings.Join(o1, ",")+"/"+strings.Join(o2, ","), func(t *testing.T) {
				w := newWorldWith(t, tiny)
				api := types.NamespacedName{Namespace: "payments", Name: "api"}
				x := w.book("tiny", api.Namespace, api.Name)
				gone := w.Live(api.Namespace, api.Name, x.ID)
				y := w.book("tiny", "ci", "live")
				w.Live("ci", "live", y.ID)
				w.sweep(w.sweeper()) // uids back-filled
				w.Remove(gone)
				w.sweep(w.sweeper()) // X orphaned
				w.Clock.Step(time.Hour)
				p, _ := w.Cfg.Pool("tiny")
				alloc := func(s *schedule, party string) *allocator.Allocator {
					return allocator.New(allocator.Options{Cloud: bookingCloud{gatedCloud{Cloud: w.Cloud, party: party, s: s}}, Config: w.Cfg,
						References: fixtures.Records(w.Kube), Clock: w.Clock,
						Retention: ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: margin}})
				}

				s1 := newSchedule(o1)
				var handed []string
				var res *ipam.Reservation
				var merr, aerr error
				run(s1, map[string]func(){
					"marker": func() {
						_, merr = alloc(s1, "marker").Reserve(context.Background(), ipam.Request{Pool: p, Service: types.NamespacedName{Namespace: "ci", Name: "new"}})
					},
					"admission": func() {
						res, aerr = alloc(s1, "admission").Reserve(context.Background(), ipam.Request{Pool: p, Service: api})
					},
				})
				if ipam.ReasonOf(merr) != ipam.ReasonYielding {
					t.Fatalf("ci/new in the full pool: %v, want a retryable refusal", merr)
				}
				if aerr == nil {
					handed = append(handed, res.ID)
					w.Live(api.Namespace, api.Name, res.ID)
				} else if ipam.ReasonOf(aerr) != ipam.ReasonYielding {
					t.Fatalf("the re-create: %v", aerr)
				}

				w.Clock.Step(margin + time.Second)
				s2 := newSchedule(o2)
				var rep Report
				var serr error
				parties := map[string]func(){
					"sweeper": func() {
						rep, serr = w.sweeper(func(o *Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s2} }).Sweep(context.Background())
					},
				}
				if aerr == nil {
					s2.finish("retry") // nothing to retry: its steps are skipped
				} else {
					parties["retry"] = func() {
						res, aerr = alloc(s2, "retry").Reserve(context.Background(), ipam.Request{Pool: p, Service: api})
						if aerr == nil {
							handed = append(handed, res.ID)
						}
					}
				}
				run(s2, parties)
				if serr != nil {
					t.Fatal(serr)
				}
				for _, id := range append(handed, y.ID) {
					if !w.Exists(id) {
						t.Fatalf("invariant 2: %s was handed out (or is live) and is released; steps %v then %v", id, s1.made, s2.made)
					}
				}
				if len(handed) > 0 && handed[0] == x.ID {
					takenBack++
					if slices.Contains(rep.Released, x.ID) {
						t.Fatalf("X was taken back and released")
					}
				}
				if rep.EarlyReleased["tiny"] == 1 {
					releasedEarly++
					if aerr != nil && ipam.ReasonOf(aerr) != ipam.ReasonYielding {
						t.Fatalf("the retry after the early release: %v", aerr)
					}
				}
				if aerr == nil && res.Address != netip.MustParseAddr("172.16.35.251") && res.Address != netip.MustParseAddr("172.16.35.252") {
					t.Fatalf("handed out %s outside the pool", res.Address)
				}
			})
		}
	}
	if takenBack == 0 || releasedEarly == 0 {
		t.Fatalf("vacuous: X taken back in %d cases, released early in %d", takenBack, releasedEarly)
	}
	t.Logf("X taken back in %d cases, released early in %d (of 36)", takenBack, releasedEarly)
}

// yieldWorld is a world whose admissions go through the real mutator with
// a 20 s margin and a one-minute sweep: a refusal asks for a retry in
// 80 s. Namespace ci is opted in beside payments.
func yieldWorld(t *testing.T) (*world, *webhook.ServiceMutator) { return yieldWorldWith(t, tiny) }

// yieldWorldWith is yieldWorld with these pools beside the world's.
func yieldWorldWith(t *testing.T, pools string) (*world, *webhook.ServiceMutator) {
	w := newWorldWith(t, pools)
	if err := w.Kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{request.LabelEnabled: "true"}}}); err != nil {
		t.Fatal(err)
	}
	alloc := allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, References: fixtures.Records(w.Kube), Clock: w.Clock,
		Retention: ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: 20 * time.Second, SweepInterval: time.Minute}})
	return w, &webhook.ServiceMutator{Allocator: alloc, Namespaces: w.Kube, Log: logr.Discard()}
}

// retained admits ns/name in pool, lets the sweeper see it used, deletes it
// and lets the sweeper mark it retained; it returns its IPAM ID.
func (w *world) retainedIn(m *webhook.ServiceMutator, pool, ns, name string) string {
	w.T.Helper()
	svc, _ := w.admit(m, ns, name, map[string]string{request.AnnotationPool: pool})
	w.sweep(w.sweeper())
	w.Remove(svc)
	w.sweep(w.sweeper())
	return svc.Annotations[ccm.AnnotationPrivateIPIDs]
}

func wantYield(t *testing.T, resp admission.Response, retryAfter int32, msg ...string) {
	t.Helper()
	if resp.Allowed || resp.Result.Code != http.StatusTooManyRequests || resp.Result.Details == nil || resp.Result.Details.RetryAfterSeconds != retryAfter {
		t.Fatalf("want a 429 with Retry-After %d, got allowed=%v %+v", retryAfter, resp.Allowed, resp.Result)
	}
	for _, m := range msg {
		if !strings.Contains(resp.Result.Message, m) {
			t.Fatalf("message %q lacks %q", resp.Result.Message, m)
		}
	}
}

func TestFullPoolsYield(t *testing.T) {
	pool := map[string]string{request.AnnotationPool: "tiny"}
	t.Run("pool full of retained: 429 with the counts, the oldest marked, the retry books after the sweeper releases", func(t *testing.T) {
		w, m := yieldWorld(t)
		x := w.retainedIn(m, "tiny", "payments", "old")
		w.admit(m, "ci", "live", pool)
		w.Clock.Step(time.Hour)
		// A dry run changes nothing, and is not told to retry: its retries
		// would wait for a release nobody asked for.
		if _, resp := w.try(m, "payments", "new", pool, true); resp.Allowed || resp.Result.Code == http.StatusTooManyRequests ||
			!strings.Contains(resp.Result.Message, "a CREATE would release the oldest (172.16.35.251") || w.broughtForward(x) {
			t.Fatalf("a dry run: allowed=%v, %+v, release-at %v: it must write nothing and not ask for a retry", resp.Allowed, resp.Result, w.Entry(x).ReleaseAt)
		}
		_, resp := w.try(m, "payments", "new", pool, false)
		wantYield(t, resp, 80, `pool "tiny" is full; 1 of its 2 addresses are retained for deleted Services; the oldest (172.16.35.251, of the deleted payments/old) is being released`, "retry in ~80 s")
		if at := w.Entry(x).ReleaseAt; !at.Equal(w.Clock.Now().Add(20 * time.Second)) {
			t.Fatalf("release-at %v, want the margin from now", at)
		}
		// The retry before the release asks for nothing more.
		_, resp = w.try(m, "payments", "new", pool, false)
		wantYield(t, resp, 80, "the oldest is being released for this Service")
		w.Clock.Step(20*time.Second + time.Second)
		if rep := w.sweep(w.sweeper()); !slices.Equal(rep.Released, []string{x}) || rep.EarlyReleased["tiny"] != 1 {
			t.Fatalf("released %v, early %v; want %s early", rep.Released, rep.EarlyReleased, x)
		}
		svc, _ := w.admit(m, "payments", "new", pool)
		if got := svc.Annotations[request.AnnotationAddresses]; got != "172.16.35.251" {
			t.Fatalf("the retry got %q, want the released address", got)
		}
	})
	t.Run("a reservation inside the reuse margin is never chosen", func(t *testing.T) {
		w, m := yieldWorld(t)
		w.admit(m, "ci", "live", pool)
		w.Clock.Step(time.Hour)
		y := w.retainedIn(m, "tiny", "payments", "old") // orphaned just now
		w.Clock.Step(10 * time.Second)
		_, resp := w.try(m, "payments", "new", pool, false)
		wantYield(t, resp, 80, "none of which may be released yet (deleted within the last 20 s")
		if w.broughtForward(y) {
			t.Fatal("a reservation orphaned within the margin was brought forward")
		}
		// The re-create it is kept for takes it back.
		if svc, _ := w.admit(m, "payments", "old", pool); svc.Annotations[ccm.AnnotationPrivateIPIDs] != y {
			t.Fatalf("the re-create got %q, want %s back", svc.Annotations[ccm.AnnotationPrivateIPIDs], y)
		}
	})
	t.Run("a namespace at its share yields its own oldest", func(t *testing.T) {
		w, m := yieldWorld(t)
		share(w, "dc-link", 2)
		dc := map[string]string{request.AnnotationPool: "dc-link"}
		other := w.retainedIn(m, "dc-link", "payments", "oldest")
		w.Clock.Step(time.Hour)
		a := w.retainedIn(m, "dc-link", "ci", "a")
		w.Clock.Step(time.Hour)
		b := w.retainedIn(m, "dc-link", "ci", "b")
		w.Clock.Step(time.Hour)
		_, resp := w.try(m, "ci", "c", dc, false)
		wantYield(t, resp, 80, `namespace ci holds 2/2 addresses of pool "dc-link"; 2 of them are retained for deleted Services; the oldest`, "of the deleted ci/a) is being released")
		if !w.broughtForward(a) || w.broughtForward(b) || w.broughtForward(other) {
			t.Fatalf("brought forward: ci/a %v, ci/b %v, payments/oldest %v; want ci/a's only", w.Entry(a).ReleaseAt, w.Entry(b).ReleaseAt, w.Entry(other).ReleaseAt)
		}
		// A retry that comes after the release was expected, before a
		// (slow) cycle made it, waits for it rather than bring ci/b's
		// forward too.
		w.Clock.Step(81 * time.Second)
		_, resp = w.try(m, "ci", "c", dc, false)
		if resp.Allowed || !strings.Contains(resp.Result.Message, "being released") || w.broughtForward(b) {
			t.Fatalf("a late retry: %+v, ci/b release-at %v; want it to wait for ci/a's release", resp.Result, w.Entry(b).ReleaseAt)
		}
		// Other namespaces are not held to ci's share.
		w.admit(m, "payments", "more", dc)
	})
	t.Run("a namespace at its share with all live is denied naming them", func(t *testing.T) {
		w, m := yieldWorld(t)
		share(w, "dc-link", 2)
		dc := map[string]string{request.AnnotationPool: "dc-link"}
		w.admit(m, "ci", "svc-b", dc)
		w.admit(m, "ci", "svc-a", dc)
		w.sweep(w.sweeper())
		_, resp := w.try(m, "ci", "svc-c", dc, false)
		if resp.Allowed || resp.Result.Code == http.StatusTooManyRequests || !strings.Contains(resp.Result.Message, `namespace ci holds 2/2 addresses of pool "dc-link", all used by its live Services: svc-a, svc-b; delete one of them or ask for another pool`) {
			t.Fatalf("want a denial naming the Services, got %+v", resp.Result)
		}
	})
}

// broughtForward reports whether the ledger releases id before its
// retention ends: a full pool or share made it yield.
func (w *world) broughtForward(id string) bool {
	w.T.Helper()
	e := w.Entry(id)
	p, _ := w.Cfg.Pool(e.Pool)
	return e.ReleaseAt.Before(e.OrphanedSince.Add(p.Retention.Duration))
}

// tinyNodes is a pool of two addresses on the nodes' network: with tiny, a
// Service may ask for two full pools.
const tinyNodes = "  - {name: tiny-nodes, privateNetworkID: {{nodes}}, ranges: [172.16.3.251-172.16.3.252], retention: 24h}\n"

// TestTwoFullPoolsYieldOneReleaseEach: a Service asking for two full pools
// gets a release brought forward in each, one after the other, and then
// both addresses; a release remembered in one pool is no answer in the
// other. A dry run in between is never told to retry.
func TestTwoFullPoolsYieldOneReleaseEach(t *testing.T) {
	w, m := yieldWorldWith(t, tiny+tinyNodes)
	both := map[string]string{request.AnnotationPool: "tiny,tiny-nodes"}
	x := w.retainedIn(m, "tiny", "payments", "old-a")
	y := w.retainedIn(m, "tiny-nodes", "payments", "old-b")
	w.admit(m, "ci", "live", both)
	w.Clock.Step(time.Hour)

	_, resp := w.try(m, "payments", "new", both, false)
	wantYield(t, resp, 80, `pool "tiny" is full`, "(172.16.35.251, of the deleted payments/old-a) is being released")
	// A dry run now: its answer must not be the retry remembered for the
	// CREATE, and it writes nothing.
	if _, resp := w.try(m, "payments", "new", both, true); resp.Allowed || resp.Result.Code == http.StatusTooManyRequests || !strings.Contains(resp.Result.Message, "nothing was changed (dry run)") {
		t.Fatalf("a dry run after the CREATE's refusal: %+v; want a non-retryable answer", resp.Result)
	}
	if !w.broughtForward(x) || w.broughtForward(y) {
		t.Fatalf("brought forward: tiny's %v, tiny-nodes' %v; want tiny's only", w.broughtForward(x), w.broughtForward(y))
	}
	w.Clock.Step(21 * time.Second)
	if rep := w.sweep(w.sweeper()); !slices.Equal(rep.Released, []string{x}) {
		t.Fatalf("released %v, want %s", rep.Released, x)
	}
	// The retry books in tiny, and finds tiny-nodes full: nothing was
	// brought forward there yet, so it is now.
	_, resp = w.try(m, "payments", "new", both, false)
	wantYield(t, resp, 80, `pool "tiny-nodes" is full`, "(172.16.3.251, of the deleted payments/old-b) is being released")
	if !w.broughtForward(y) {
		t.Fatal("tiny-nodes' oldest was not brought forward: the Service would wait for ever")
	}
	// Until it is released, a retry waits for it.
	_, resp = w.try(m, "payments", "new", both, false)
	wantYield(t, resp, 80, `pool "tiny-nodes" is full`, "the oldest is being released for this Service")
	w.Clock.Step(21 * time.Second)
	if rep := w.sweep(w.sweeper()); !slices.Equal(rep.Released, []string{y}) {
		t.Fatalf("released %v, want %s", rep.Released, y)
	}
	svc, _ := w.admit(m, "payments", "new", both)
	if got := svc.Annotations[request.AnnotationAddresses]; got != "172.16.35.251,172.16.3.251" {
		t.Fatalf("the Service got %q, want both released addresses", got)
	}
}

func share(w *world, pool string, n int) {
	p, _ := w.Cfg.Pool(pool)
	p.MaxPerNamespace = &n
}

// TestDryRunOnAPoolOfDeletedServicesIsNotRetried: a pool full of
// reservations of Services just deleted (the sweeper has not marked them
// retained yet) asks a CREATE to retry; a dry run is told what a CREATE
// would get, without a retry that would wait for nothing.
func TestDryRunOnAPoolOfDeletedServicesIsNotRetried(t *testing.T) {
	w, m := yieldWorld(t)
	pool := map[string]string{request.AnnotationPool: "tiny"}
	for _, name := range []string{"a", "b"} {
		svc, _ := w.admit(m, "payments", name, pool)
		w.Remove(svc)
	}
	if _, resp := w.try(m, "payments", "new", pool, true); resp.Allowed || resp.Result.Code == http.StatusTooManyRequests ||
		!strings.Contains(resp.Result.Message, "not retained yet") || !strings.Contains(resp.Result.Message, "(dry run)") {
		t.Fatalf("a dry run: %+v; want a non-retryable answer saying what a CREATE would get", resp.Result)
	}
	_, resp := w.try(m, "payments", "new", pool, false)
	wantYield(t, resp, 80, "belong to no live Service and are not retained yet")
}
