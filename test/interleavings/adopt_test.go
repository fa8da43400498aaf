package interleavings

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// adoptionMargin is the release protocol's margin in these tests.
const adoptionMargin = 20 * time.Second

// green is how cluster green is installed: its pool general's retention,
// its pending grace and its release margin, each of which may differ from
// prod's (1h, sweeper.DefaultPendingGrace, adoptionMargin): a reader
// judges prod's release from prod's ledger, never from these.
type green struct {
	name      string
	retention string
	grace     time.Duration
	margin    time.Duration
}

// greens are the installs the adoption interleavings run with.
var greens = []green{
	{"same install", "1h", sweeper.DefaultPendingGrace, adoptionMargin},
	{"longer retention, grace and margin", "24h", 3 * sweeper.DefaultPendingGrace, 2 * adoptionMargin},
	{"shorter retention, grace and margin", "30m", sweeper.DefaultPendingGrace / 2, adoptionMargin / 2},
}

// adopter is an admission of cluster green, on the world's networks with
// the world's pools, each adopting from the world's cluster: a cluster
// migration from it. cloud is what the admission calls; g (the first of
// greens when omitted) is green's install.
func (w *world) adopter(cloud scaleway.Cloud, g ...green) *allocator.Allocator {
	w.T.Helper()
	inst := greens[0]
	if len(g) > 0 {
		inst = g[0]
	}
	cfg := w.Config(w.T, fixtures.GreenPoolFile(w.Cfg.ClusterName, inst.retention))
	// Green's Services: none yet.
	return fixtures.Must(allocator.New(allocator.Options{Cloud: cloud, Config: cfg, Clock: w.Clock,
		Retention: ipam.Retention{PendingGrace: inst.grace, Margin: inst.margin}, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
}

// TestAdoptionAndTheOtherClustersReleaseEveryInterleaving drives cluster
// prod's sweeper releasing a retained IP and cluster green's CREATE of the
// same Service adopting it through every order of {sweeper GetIP, sweeper
// ReleaseIP, admission ListIPs, admission SetTags}, inside the retention,
// inside the margin and after the release is due. An adopted IP is never
// released, then or by prod's later cycles; inside the retention it is
// adopted, once due it is released.
func TestAdoptionAndTheOtherClustersReleaseEveryInterleaving(t *testing.T) {
	for _, g := range greens {
		// Inside both margins: prod's release is as close to green as it
		// is to prod.
		inside := min(adoptionMargin, g.margin) / 2
		zones := []struct {
			name             string
			before           time.Duration // before the release
			adopted, release bool
		}{
			{"inside the retention", max(adoptionMargin, g.margin) + time.Minute, true, false},
			{"inside the margin", inside, false, false},
			{"release due", -time.Minute, false, true},
		}
		for _, z := range zones {
			for _, order := range interleavings("ListIPs") {
				t.Run(g.name+"/"+z.name+"/"+strings.Join(order, ","), func(t *testing.T) {
					adoptionRace(t, g, z.before, z.adopted, z.release, order)
				})
			}
		}
	}
}

// adoptionRace is one run of TestAdoptionAndTheOtherClustersReleaseEveryInterleaving:
// green installed as g adopts at before prod's release, in order.
func adoptionRace(t *testing.T, g green, before time.Duration, wantAdopted, wantReleased bool, order []string) {
	w := newWorld(t)
	api := types.NamespacedName{Namespace: "payments", Name: "api"}
	x := w.usedThenRetained("general", api)
	p, _ := w.Cfg.Pool("general")
	release := w.Entry(x.ID).OrphanedSince.Add(p.Retention.Duration)
	if at := w.Entry(x.ID).ReleaseAt; !at.Equal(release) {
		t.Fatalf("prod's ledger says release-at %v, want orphaned-since + prod's retention %v", at, release)
	}
	w.Clock.SetTime(release.Add(-before))

	s := newSchedule(order)
	sw := w.sweeper(func(o *sweeper.Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s} })
	green := w.adopter(gatedCloud{Cloud: w.Cloud, party: "admission", s: s}, g)
	gp, _ := green.Config().Pool("general")
	rep, res, serr, aerr := race(s, sw, green, ipam.Request{Pool: gp, Service: api})
	if serr != nil || aerr != nil {
		t.Fatalf("sweep: %v, admission: %v", serr, aerr)
	}
	if !w.Exists(res.ID) {
		t.Fatalf("the admission handed out %s (adopted from %q), which is released", res.ID, res.AdoptedFrom)
	}
	adopted, released := res.ID == x.ID, slices.Contains(rep.Released, x.ID)
	if adopted != wantAdopted || released != wantReleased {
		t.Fatalf("adopted=%v released=%v, want adopted=%v released=%v", adopted, released, wantAdopted, wantReleased)
	}
	if !adopted {
		return
	}
	if e := w.Entry(x.ID); e.Cluster != "green" || res.AdoptedFrom != w.Cfg.ClusterName {
		t.Fatalf("adopted %+v, ledger %+v", res, e)
	}
	// Prod's cycles, long past the retention it had: never
	// released, never re-tagged.
	w.Clock.Step(48 * time.Hour)
	for range 2 {
		if rep := w.sweep(w.sweeper()); slices.Contains(rep.Released, x.ID) {
			t.Fatal("prod released the IP green adopted")
		}
	}
	if e := w.Entry(x.ID); e.Cluster != "green" {
		t.Fatalf("prod's cycles re-tagged it: %+v", e)
	}
}

// TestCycleWritesNoTagsOfAnAdoptedIP: prod's cycle lists X with prod's
// tags, green adopts X (its one write), then prod's cycle would write X's
// ledger from its listing: orphaned-since on an IP whose Service prod
// deleted, or orphaned-since cleared on one a Service of prod references
// again. Written, prod's tags replace green's, and X is prod's again, to
// release once retained there. The cycle re-reads first, and leaves it.
func TestCycleWritesNoTagsOfAnAdoptedIP(t *testing.T) {
	for _, tt := range []struct {
		name string
		// setup leaves X as prod's cycle is to find it.
		setup func(w *world, x *ipam.Grant)
	}{
		{"deleted in prod: the cycle tags it orphaned", func(w *world, x *ipam.Grant) {
			live := w.Live("payments", "api", x.ID)
			w.sweep(w.sweeper())
			w.Remove(live)
		}},
		{"referenced in prod again: the cycle clears orphaned-since", func(w *world, x *ipam.Grant) {
			live := w.Live("payments", "api", x.ID)
			w.sweep(w.sweeper())
			w.Remove(live)
			w.sweep(w.sweeper())
			w.Clock.Step(time.Minute)
			w.Live("payments", "api", x.ID)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			api := types.NamespacedName{Namespace: "payments", Name: "api"}
			x := w.book("general", api.Namespace, api.Name)
			tt.setup(w, x)
			s := newSchedule([]string{"sweeper:ListIPs", "admission:ListIPs", "admission:SetTags", "sweeper:GetIP", "sweeper:SetTags"})
			sw := w.sweeper(func(o *sweeper.Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s} })
			green := w.adopter(gatedCloud{Cloud: w.Cloud, party: "admission", s: s})
			gp, _ := green.Config().Pool("general")
			_, res, serr, aerr := race(s, sw, green, ipam.Request{Pool: gp, Service: api})
			if serr != nil || aerr != nil {
				t.Fatalf("sweep: %v, admission: %v", serr, aerr)
			}
			if res.ID != x.ID {
				t.Fatalf("green did not adopt %s: %+v", x.ID, res)
			}
			if slices.Contains(s.made, "sweeper:SetTags") {
				t.Errorf("prod's cycle wrote tags after green's adoption (steps %v)", s.made)
			}
			if e := w.Entry(x.ID); e.Cluster != "green" || !e.OrphanedSince.IsZero() {
				t.Fatalf("ledger after prod's cycle: %+v, want green's, not orphaned", e)
			}
		})
	}
}

// TestHandoverAndTheOtherClustersReleaseEveryInterleaving drives green's
// `scw-lb-ipam handover` (its listing, re-read and write) against prod's
// sweeper releasing the retained IP (its re-read and release), in every
// order, inside prod's retention, inside its margin and once due, with
// green installed as each of greens: a moved IP is never released by
// prod, and one prod is releasing is never moved.
func TestHandoverAndTheOtherClustersReleaseEveryInterleaving(t *testing.T) {
	for _, g := range greens {
		inside := min(adoptionMargin, g.margin) / 2
		for _, z := range []struct {
			name           string
			before         time.Duration
			moved, release bool
		}{
			{"inside the retention", max(adoptionMargin, g.margin) + time.Minute, true, false},
			{"inside the margin", inside, false, false},
			{"release due", -time.Minute, false, true},
		} {
			for _, order := range orders([]string{"sweeper:GetIP", "sweeper:ReleaseIP"}, []string{"handover:ListIPs", "handover:GetIP", "handover:SetTags"}) {
				t.Run(g.name+"/"+z.name+"/"+strings.Join(order, ","), func(t *testing.T) {
					w := newWorld(t)
					x := w.usedThenRetained("general", types.NamespacedName{Namespace: "payments", Name: "api"})
					w.Clock.SetTime(w.Entry(x.ID).ReleaseAt.Add(-z.before))

					s := newSchedule(order)
					sw := w.sweeper(func(o *sweeper.Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s} })
					cfg := w.adopter(w.Cloud, g).Config()
					policy := ipam.Retention{PendingGrace: g.grace, Margin: g.margin}
					var rep sweeper.Report
					var handed []ipam.Handed
					var serr, herr error
					run(s, map[string]func(){
						"sweeper": func() { rep, serr = sw.Sweep(context.Background()) },
						"handover": func() {
							handed, herr = allocator.Handover(context.Background(), gatedCloud{Cloud: w.Cloud, party: "handover", s: s}, cfg, policy,
								ipam.HandoverRequest{From: w.Cfg.ClusterName, Now: w.Clock.Now})
						},
					})
					if serr != nil || herr != nil {
						t.Fatalf("sweep: %v, handover: %v", serr, herr)
					}
					moved := slices.ContainsFunc(handed, func(h ipam.Handed) bool { return h.ID == x.ID && h.Skipped == "" })
					released := slices.Contains(rep.Released, x.ID)
					if moved && !w.Exists(x.ID) {
						t.Fatalf("handover reported %s moved, and prod released it (steps %v)", x.ID, s.made)
					}
					if moved != z.moved || released != z.release {
						t.Fatalf("moved=%v released=%v, want moved=%v released=%v (steps %v, handed %+v)", moved, released, z.moved, z.release, s.made, handed)
					}
					if !moved {
						return
					}
					// Prod's cycles long past its retention: never released.
					w.Clock.Step(48 * time.Hour)
					if rep := w.sweep(w.sweeper()); slices.Contains(rep.Released, x.ID) || w.Entry(x.ID).Cluster != "green" {
						t.Fatalf("prod released or re-tagged the IP handed to green: %+v", w.Entry(x.ID))
					}
				})
			}
		}
	}
}
