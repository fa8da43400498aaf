package interleavings

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// world is cluster prod (fixtures.ProdWorld), its sweeper and its
// admissions built through their exported APIs, as internal/app builds
// them.
type world struct{ *fixtures.World }

// newWorld is cluster prod, with pools beside its own.
func newWorld(t testing.TB, pools ...string) *world {
	t.Helper()
	return &world{fixtures.ProdWorld(t, pools...)}
}

// sweeper is prod's sweeper, its options changed by mod (a gated Cloud, a
// margin); it records no Event.
func (w *world) sweeper(mod ...func(*sweeper.Options)) *sweeper.Sweeper {
	o := sweeper.Options{Cloud: w.Cloud, Config: func() *ipam.Config { return w.Cfg }, Services: w.Kube, Clock: w.Clock, Log: logr.Discard()}
	for _, m := range mod {
		m(&o)
	}
	return sweeper.New(o)
}

// book reserves an IP as an admission would, ungated.
func (w *world) book(pool, ns, name string) *ipam.Grant {
	w.T.Helper()
	return w.Book(fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, Clock: w.Clock, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}})), pool, ns, name)
}

// sweep runs one cycle and checks invariant 2: every IP a live Service
// references still exists.
func (w *world) sweep(s *sweeper.Sweeper) sweeper.Report {
	w.T.Helper()
	return fixtures.Swept(w.World, s.Sweep)
}

// usedThenRetained books an IP in pool for svc, lets the sweeper see a
// live Service use it (uid back-filled), deletes the Service and lets the
// sweeper retain it (orphaned-since and release-at set).
func (w *world) usedThenRetained(pool string, svc types.NamespacedName) *ipam.Grant {
	w.T.Helper()
	x := w.book(pool, svc.Namespace, svc.Name)
	live := w.Live(svc.Namespace, svc.Name, x.ID)
	w.sweep(w.sweeper())
	w.Remove(live)
	w.sweep(w.sweeper())
	return x
}

// race runs a sweep and a reservation at once, each party's calls gated by
// s, and returns what each ended with.
func race(s *schedule, sw *sweeper.Sweeper, alloc *allocator.Allocator, req ipam.Request) (rep sweeper.Report, res *ipam.Grant, serr, aerr error) {
	run(s, map[string]func(){
		"sweeper":   func() { rep, serr = sw.Sweep(context.Background()) },
		"admission": func() { res, aerr = alloc.Reserve(context.Background(), req) },
	})
	return rep, res, serr, aerr
}

// interleavings are every order of the sweeper's re-read and release and
// the admission's sticky read (read: its listing of the Service, or its
// re-read of the index's candidate) and take-back, each party's own order
// kept: the six ways the two can meet on one retained IP.
func interleavings(read string) [][]string {
	return orders([]string{"sweeper:GetIP", "sweeper:ReleaseIP"}, []string{"admission:" + read, "admission:SetTags"})
}
