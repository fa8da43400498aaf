package sweeper

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// schedule releases gated calls in a fixed order. Each step is
// "<party>:<op>"; a call whose step is still ahead waits for its turn, one
// already passed (or never scheduled) goes through. A party that finishes
// without making its remaining steps (it decided not to) has them skipped.
type schedule struct {
	mu       sync.Mutex
	cond     *sync.Cond
	steps    []string
	next     int
	finished map[string]bool
	made     []string // the steps made, in order
}

func newSchedule(steps []string) *schedule {
	s := &schedule{steps: steps, finished: map[string]bool{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func party(step string) string { p, _, _ := strings.Cut(step, ":"); return p }

func (s *schedule) skip() {
	for s.next < len(s.steps) && s.finished[party(s.steps[s.next])] {
		s.next++
	}
	s.cond.Broadcast()
}

// enter blocks until step's turn; false when step is not ahead.
func (s *schedule) enter(step string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.steps[s.next:], step) {
		return false
	}
	for s.steps[s.next] != step {
		s.cond.Wait()
	}
	return true
}

func (s *schedule) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made = append(s.made, s.steps[s.next])
	s.next++
	s.skip()
}

func (s *schedule) finish(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished[p] = true
	s.skip()
}

// gatedCloud holds one party's GetIP, ListIPs, SetTags and ReleaseIP calls
// until the schedule lets them through.
type gatedCloud struct {
	scaleway.Cloud
	party string
	s     *schedule
}

func (c gatedCloud) gate(op string) func() {
	if c.s.enter(c.party + ":" + op) {
		return c.s.leave
	}
	return func() {}
}

func (c gatedCloud) GetIP(ctx context.Context, id string) (*scaleway.IP, error) {
	defer c.gate("GetIP")()
	return c.Cloud.GetIP(ctx, id)
}

func (c gatedCloud) ListIPs(ctx context.Context, f scaleway.ListFilter) ([]*scaleway.IP, error) {
	defer c.gate("ListIPs")()
	return c.Cloud.ListIPs(ctx, f)
}

func (c gatedCloud) SetTags(ctx context.Context, id string, tags []string) (*scaleway.IP, error) {
	defer c.gate("SetTags")()
	return c.Cloud.SetTags(ctx, id, tags)
}

func (c gatedCloud) ReleaseIP(ctx context.Context, id string) error {
	defer c.gate("ReleaseIP")()
	return c.Cloud.ReleaseIP(ctx, id)
}

// race runs a sweep and a reservation at once, each party's calls gated by
// s, and returns what each ended with.
func race(s *schedule, sw *Sweeper, alloc *allocator.Allocator, req ipam.Request) (rep Report, res *ipam.Reservation, serr, aerr error) {
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

			s := newSchedule(order)
			sw := w.sweeper(func(o *Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s}; o.Margin = margin })
			alloc := allocator.New(allocator.Options{Cloud: gatedCloud{Cloud: w.Cloud, party: "admission", s: s}, Config: w.Cfg,
				References: fixtures.Records(w.Kube), Clock: w.Clock, Retention: ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: margin}})
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
				if rep := w.sweep(w.sweeper(func(o *Options) { o.Margin = margin })); slices.Contains(rep.Released, x.ID) {
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
				sw := w.sweeper(func(o *Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s} })
				alloc := allocator.New(allocator.Options{Cloud: gatedCloud{Cloud: w.Cloud, party: "admission", s: s}, Config: w.Cfg,
					References: fixtures.Records(w.Kube), Clock: w.Clock,
					Retention: ipam.Retention{PendingGrace: DefaultPendingGrace, Margin: margin}})
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
