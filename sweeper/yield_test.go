package sweeper

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/go-logr/logr"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// tiny is a pool of two addresses.
const tiny = "  - {name: tiny, privateNetworkID: {{dc}}, ranges: [172.16.35.251-172.16.35.252], retention: 24h}\n"

// yieldWorld is a world whose admissions go through the real mutator with
// a 20 s margin and a one-minute sweep: a refusal asks for a retry in
// 80 s. Namespace ci is opted in beside payments.
func yieldWorld(t *testing.T) (*world, *webhook.ServiceMutator) { return yieldWorldWith(t, tiny) }

// yieldWorldWith is yieldWorld with these pools beside the world's.
func yieldWorldWith(t *testing.T, pools string) (*world, *webhook.ServiceMutator) {
	w := newWorld(t, pools)
	if err := w.Kube.Create(context.Background(), fixtures.Namespace("ci", true)); err != nil {
		t.Fatal(err)
	}
	alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, References: fixtures.Records(w.Kube), Clock: w.Clock,
		Retention: ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: 20 * time.Second, SweepInterval: time.Minute}, Claims: allocator.NoClaims{}}))
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

// twoFullPools fills pools tiny and tiny-nodes, each with one live
// Service of ci and one reservation retained for a deleted Service of
// payments an hour ago (x in tiny, y in tiny-nodes); both is the request
// of both pools.
func twoFullPools(t *testing.T) (w *world, m *webhook.ServiceMutator, both map[string]string, x, y string) {
	w, m = yieldWorldWith(t, tiny+tinyNodes)
	both = map[string]string{request.AnnotationPool: "tiny,tiny-nodes"}
	x = w.retainedIn(m, "tiny", "payments", "old-a")
	y = w.retainedIn(m, "tiny-nodes", "payments", "old-b")
	w.admit(m, "ci", "live", both)
	w.Clock.Step(time.Hour)
	return w, m, both, x, y
}

// TestTwoFullPoolsYieldOneReleaseEach: a Service asking for two full pools
// gets a release brought forward in each, one after the other, and then
// both addresses; a release remembered in one pool is no answer in the
// other. A dry run in between is never told to retry.
func TestTwoFullPoolsYieldOneReleaseEach(t *testing.T) {
	w, m, both, x, y := twoFullPools(t)

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

// TestTwoFullPoolsKeepTheFirstRelease: the dangerous order of two full
// pools. The retry books the address released in the first pool and the
// second answers 429; another CREATE of the first pool comes before the
// next retry. The first booking is kept for the Service (tagged for it,
// taken back by the retry's sticky path), so the other CREATE is refused
// and the retry gets both addresses: one release in each pool, never an
// early release for nothing.
func TestTwoFullPoolsKeepTheFirstRelease(t *testing.T) {
	w, m, both, x, y := twoFullPools(t)

	_, resp := w.try(m, "payments", "new", both, false)
	wantYield(t, resp, 80, `pool "tiny" is full`)
	w.Clock.Step(21 * time.Second)
	if rep := w.sweep(w.sweeper()); !slices.Equal(rep.Released, []string{x}) {
		t.Fatalf("released %v, want %s", rep.Released, x)
	}
	_, resp = w.try(m, "payments", "new", both, false)
	wantYield(t, resp, 80, `pool "tiny-nodes" is full`)
	// The sweeper marks the kept booking pending, and its margin passes.
	w.sweep(w.sweeper())
	w.Clock.Step(21 * time.Second)
	kept := w.admittedID(m, "tiny", "payments", "new")
	// Another CREATE of tiny between the retries: neither given the
	// address nor the cause of its early release.
	if _, resp := w.try(m, "ci", "other", map[string]string{request.AnnotationPool: "tiny"}, false); resp.Allowed {
		t.Fatalf("another Service took %s, the address released for payments/new", resp.Patches)
	}
	if e := w.Entry(kept); e.Early {
		t.Fatalf("the booking kept for payments/new yields to another Service: %+v", e)
	}
	w.Clock.Step(21 * time.Second)
	if rep := w.sweep(w.sweeper()); !slices.Contains(rep.Released, y) {
		t.Fatalf("released %v, want %s", rep.Released, y)
	}
	svc, _ := w.admit(m, "payments", "new", both)
	if got := svc.Annotations[request.AnnotationAddresses]; got != "172.16.35.251,172.16.3.251" {
		t.Fatalf("the Service got %q, want both released addresses", got)
	}
}

// admittedID is the ID of this cluster's reservation of pool for ns/name.
func (w *world) admittedID(_ *webhook.ServiceMutator, pool, ns, name string) string {
	w.T.Helper()
	for _, ip := range w.Srv.IPs() {
		if e, ok := ipam.ParseEntry(ip.Tags); ok && e.Pool == pool && e.Service.Namespace == ns && e.Service.Name == name {
			return ip.ID
		}
	}
	w.T.Fatalf("no reservation of pool %s for %s/%s", pool, ns, name)
	return ""
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
