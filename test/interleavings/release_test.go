package interleavings

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestRewriteAndTakeBackEveryInterleaving: the operator lengthened the
// pool's retention, so the cycle rewrites a retained IP's release-at (its
// re-read, then its write) while the Service's re-create takes it back
// (its listing, then its write), in every order. The write from a re-read
// the take-back overtook puts orphaned-since back on a live IP; the next
// cycles find it referenced and clear it, and no cycle releases it
// (invariant 2), long past both release times.
func TestRewriteAndTakeBackEveryInterleaving(t *testing.T) {
	const margin = 20 * time.Second
	for _, order := range orders([]string{"sweeper:GetIP", "sweeper:SetTags"}, []string{"admission:ListIPs", "admission:SetTags"}) {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			w := newWorld(t)
			api := types.NamespacedName{Namespace: "payments", Name: "api"}
			x := w.usedThenRetained("general", api)
			p, _ := w.Cfg.Pool("general")
			p.Retention.Duration = 24 * time.Hour
			w.Clock.Step(10 * time.Minute)

			// The cycle lists first: what it decides to rewrite comes from
			// a listing made before the take-back. A listing after it would
			// find a fresh orphan (the re-created Service is not in the
			// cache yet) and rightly retain it, an order this test is not
			// about.
			s := newSchedule(append([]string{"sweeper:ListIPs"}, order...))
			sw := w.sweeper(func(o *sweeper.Options) {
				o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s}
				o.Margin = margin
			})
			alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: gatedCloud{Cloud: w.Cloud, party: "admission", s: s}, Config: w.Cfg,
				References: fixtures.Records(w.Kube), Clock: w.Clock, Retention: ipam.Retention{PendingGrace: sweeper.DefaultPendingGrace, Margin: margin}, Claims: allocator.NoClaims{}}))
			rep, res, serr, aerr := race(s, sw, alloc, ipam.Request{Pool: p, Service: api})
			if serr != nil || aerr != nil {
				t.Fatalf("sweep: %v, admission: %v", serr, aerr)
			}
			if res.ID != x.ID || !res.Reused {
				t.Fatalf("the re-create got %+v, want %s back", res, x.ID)
			}
			if !slices.Contains(s.made, "sweeper:SetTags") && rep.Settled != 0 {
				t.Fatalf("the cycle counted a rewrite it did not make (steps %v)", s.made)
			}
			// The bad order: the cycle re-read before the take-back and
			// wrote after it, so the live IP is tagged retained again.
			at := func(step string) int { return slices.Index(s.made, step) }
			overtaken := at("sweeper:SetTags") > at("admission:SetTags") && at("sweeper:GetIP") < at("admission:SetTags") && at("sweeper:GetIP") >= 0
			if retagged := !w.Entry(x.ID).OrphanedSince.IsZero(); retagged != overtaken {
				t.Fatalf("retained again after the race: %v, want %v (steps %v)", retagged, overtaken, s.made)
			}
			// The re-created Service is live; the cycles run long past the
			// old release time and the new one.
			w.Live(api.Namespace, api.Name, x.ID)
			for range 2 {
				w.Clock.Step(25 * time.Hour)
				if rep := w.sweep(w.sweeper(func(o *sweeper.Options) { o.Margin = margin })); slices.Contains(rep.Released, x.ID) {
					t.Fatalf("a cycle released the live Service's IP (steps %v)", s.made)
				}
			}
			if e := w.Entry(x.ID); !e.OrphanedSince.IsZero() || !e.ReleaseAt.IsZero() {
				t.Fatalf("the live Service's IP is still retained: %+v (steps %v)", e, s.made)
			}
		})
	}
}

// TestReleaseProtocolEveryInterleaving drives the sweeper releasing a
// retained IP and an admission re-creating its Service through every
// interleaving of {sweeper GetIP, sweeper ReleaseIP, admission read,
// admission SetTags}, at a time well inside the retention, inside the safety
// margin before the release, and after the release is due; the admission
// reads by listing the Service's reservations (no index yet) or by
// re-reading the candidate its reservation index holds. In every case no
// ID the admission hands out is released (invariant 2); and the protocol is
// not vacuous: inside the retention the IP is taken back, after it the
// sweeper releases it.
func TestReleaseProtocolEveryInterleaving(t *testing.T) {
	for _, read := range []string{"ListIPs", "GetIP"} {
		t.Run("admission reads by "+read, func(t *testing.T) { releaseProtocol(t, read) })
	}
}

func releaseProtocol(t *testing.T, read string) {
	const margin = 20 * time.Second
	orders := interleavings(read)
	if len(orders) != 6 {
		t.Fatalf("%d interleavings, want 6", len(orders))
	}
	zones := []struct {
		name          string
		at            func(orphaned, release time.Time) time.Time
		reused, freed bool
	}{
		{"inside the retention", func(_, release time.Time) time.Time { return release.Add(-margin - time.Minute) }, true, false},
		{"inside the margin", func(_, release time.Time) time.Time { return release.Add(-margin / 2) }, false, false},
		{"release due", func(_, release time.Time) time.Time { return release.Add(time.Minute) }, false, true},
	}
	for _, z := range zones {
		for _, order := range orders {
			t.Run(z.name+"/"+strings.Join(order, ","), func(t *testing.T) {
				w := newWorld(t)
				svc := types.NamespacedName{Namespace: "payments", Name: "api"}
				x := w.usedThenRetained("general", svc)
				orphaned := w.Entry(x.ID).OrphanedSince
				p, _ := w.Cfg.Pool("general")
				w.Clock.SetTime(z.at(orphaned, orphaned.Add(p.Retention.Duration)))

				s := newSchedule(order)
				sw := w.sweeper(func(o *sweeper.Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s} })
				alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: gatedCloud{Cloud: w.Cloud, party: "admission", s: s}, Config: w.Cfg,
					References: fixtures.Records(w.Kube), Clock: w.Clock,
					Retention: ipam.Retention{PendingGrace: sweeper.DefaultPendingGrace, Margin: margin}, Claims: allocator.NoClaims{}}))
				if read == "GetIP" {
					// The index lists the pools (not a scheduled step) and
					// holds the retained IP.
					if err := alloc.Inventory().Refresh(context.Background()); err != nil {
						t.Fatal(err)
					}
				}

				rep, res, serr, aerr := race(s, sw, alloc, ipam.Request{Pool: p, Service: svc})
				if serr != nil || aerr != nil {
					t.Fatalf("sweep: %v, admission: %v", serr, aerr)
				}
				// Past the reuse window the index alone rules the IP out:
				// no re-read to schedule then.
				if (read == "ListIPs" || z.reused) && !slices.Contains(s.made, "admission:"+read) {
					t.Fatalf("the admission did not read by %s: steps made %v", read, s.made)
				}
				if !w.Exists(res.ID) {
					t.Fatalf("invariant 2: the admission handed out %s (reused=%v), which is released", res.ID, res.Reused)
				}
				freed := slices.Contains(rep.Released, x.ID)
				if res.Reused != z.reused || freed != z.freed {
					t.Fatalf("reused=%v released=%v, want reused=%v released=%v", res.Reused, freed, z.reused, z.freed)
				}
				// Taken back: the orphaned-since that would have released it is
				// gone. The test creates no Service for the admission, so a
				// sweeper listing after the take-back may mark it orphaned
				// again, from now: a new retention clock, not the old one.
				if res.Reused {
					if again := w.Entry(x.ID).OrphanedSince; res.ID != x.ID || (!again.IsZero() && again.Before(w.Clock.Now())) {
						t.Fatalf("taken back %s, orphaned-since %v (was %v)", res.ID, again, orphaned)
					}
				}
			})
		}
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
	skewed := clocktesting.NewFakeClock(w.Clock.Now())
	w.Clock.Step(2 * time.Hour)
	alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, Clock: skewed, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
	s := w.sweeper(func(o *sweeper.Options) {
		o.Cloud = racingCloud{Cloud: w.Cloud, before: func(string) {
			p, _ := w.Cfg.Pool("general")
			if _, err := alloc.Reserve(context.Background(), ipam.Request{Pool: p, Service: types.NamespacedName{Namespace: "payments", Name: "api"}}); err != nil {
				t.Fatal(err)
			}
		}}
	})
	if rep := w.sweep(s); len(rep.Released) != 0 || !w.Exists(r.ID) {
		t.Fatal("released an IP taken back during the cycle")
	}
	if !w.Entry(r.ID).OrphanedSince.IsZero() {
		t.Fatal("the reuse did not clear orphaned-since")
	}
}
