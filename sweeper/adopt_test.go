package sweeper

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// adopter is an admission of cluster green (fixtures.GreenPoolFile), on
// the world's networks, each pool adopting from the world's cluster: a
// cluster migration from it. The interleavings of test/interleavings race
// it against the sweeper; here it adopts between two of the sweeper's
// rounds.
func (w *world) adopter() *allocator.Allocator {
	w.T.Helper()
	cfg := w.Config(w.T, fixtures.GreenPoolFile(w.Cfg.ClusterName, "1h"))
	// Green's Services: none yet.
	return fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: cfg, Clock: w.Clock,
		Retention: ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: 20 * time.Second}, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
}

// TestBackfillWritesNoTagsOfAnAdoptedIP: prod's Service is created, green
// adopts its IP before prod's back-fill round runs: the round reads green's
// tags and writes nothing (it would write prod's uid into green's ledger).
func TestBackfillWritesNoTagsOfAnAdoptedIP(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper()
	s.backfills.lead(true)
	api := types.NamespacedName{Namespace: "payments", Name: "api"}
	x := w.book("general", api.Namespace, api.Name)
	created(s, w.Live(api.Namespace, api.Name, x.ID))
	green := w.adopter()
	gp, _ := green.Config().Pool("general")
	if res, err := green.Reserve(context.Background(), ipam.Request{Pool: gp, Service: api}); err != nil || res.ID != x.ID {
		t.Fatalf("green's adoption: %+v %v", res, err)
	}
	before, _ := w.Srv.IP(x.ID)
	rep := w.backfill(s)
	after, _ := w.Srv.IP(x.ID)
	if rep.Backfilled != 0 || !ipam.SameTags(before.Tags, after.Tags) {
		t.Fatalf("the back-fill wrote %v over green's %v (report %+v)", after.Tags, before.Tags, rep)
	}
}
