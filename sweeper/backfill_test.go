package sweeper

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// retained seeds n reservations of this cluster in the general pool's
// network, each a retained reservation of a Service long gone: what a
// cycle lists, and a back-fill must not.
func (w *world) retained(n int) {
	w.T.Helper()
	for i := range n {
		tags := ipam.Entry{Cluster: w.Cfg.ClusterName, Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: fmt.Sprint("gone-", i)},
			UID: fmt.Sprint("uid-gone-", i), OrphanedSince: w.Clock.Now().Add(-time.Minute), ReleaseAt: w.Clock.Now().Add(59 * time.Minute)}.Tags()
		if _, err := w.Srv.AddIP(w.PNs["edge"].ID, netip.Addr{}, tags, nil); err != nil {
			w.T.Fatal(err)
		}
	}
}

// created hands svc to the sweeper as the informer does for a new Service.
func created(s *Sweeper, svc *corev1.Service) {
	s.Handler().OnAdd(servicecache.NewRecord(svc), false)
}

func (w *world) backfill(s *Sweeper) Report {
	w.T.Helper()
	rep, err := s.Backfill(context.Background())
	if err != nil {
		w.T.Fatal(err)
	}
	return rep
}

// TestBackfillReadsOnlyItsOwnIDs: a new Service's uid is written with one
// GetIP and one SetTags per ID it references, and no listing, however many
// reservations the cluster holds.
func TestBackfillReadsOnlyItsOwnIDs(t *testing.T) {
	for _, others := range []int{0, 500} {
		t.Run(fmt.Sprint(others, " other reservations"), func(t *testing.T) {
			w := newWorld(t)
			w.retained(others)
			s := w.sweeper()
			s.backfills.lead(true)
			a, b := w.book("dc-link", "payments", "api"), w.book("general", "payments", "api")
			svc := w.Live("payments", "api", a.ID, b.ID)
			created(s, svc)
			w.Srv.ResetCounts()
			rep := w.backfill(s)
			want := map[emulator.Op]int{emulator.OpGetIP: 2, emulator.OpUpdateIP: 2}
			if got := w.CallCounts(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("calls %v, want %v", got, want)
			}
			if rep.Backfilled != 2 || rep.Errors != 0 {
				t.Fatalf("report %+v", rep)
			}
			for _, id := range []string{a.ID, b.ID} {
				if e := w.Entry(id); e.UID != string(svc.UID) || !e.OrphanedSince.IsZero() {
					t.Fatalf("ledger of %s: %+v", id, e)
				}
			}
			// Nothing queued, nothing read; queued again, it is read and
			// left as it is.
			w.Srv.ResetCounts()
			w.backfill(s)
			if got := w.CallCounts(); len(got) != 0 {
				t.Fatalf("an empty round called %v", got)
			}
			created(s, svc)
			if rep := w.backfill(s); rep.Backfilled != 0 || fmt.Sprint(w.CallCounts()) != fmt.Sprint(map[emulator.Op]int{emulator.OpGetIP: 2}) {
				t.Fatalf("a Service already back-filled: %+v, calls %v", rep, w.CallCounts())
			}
		})
	}
}

// TestBackfillReadsTheServiceWhenItRuns: what is written is decided by
// the Service in the cache when the round runs, not when it was queued.
func TestBackfillReadsTheServiceWhenItRuns(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	s := w.sweeper()
	s.backfills.lead(true)

	t.Run("deleted", func(t *testing.T) {
		r := w.book("general", "payments", "deleted")
		svc := w.Live("payments", "deleted", r.ID)
		created(s, svc)
		w.Remove(svc)
		w.Srv.ResetCounts()
		if rep := w.backfill(s); rep.Backfilled != 0 || rep.Errors != 0 || len(w.CallCounts()) != 0 {
			t.Fatalf("a deleted Service: %+v, calls %v", rep, w.CallCounts())
		}
		if e := w.Entry(r.ID); e.UID != "" {
			t.Fatalf("uid %q written for a deleted Service", e.UID)
		}
	})
	t.Run("re-created", func(t *testing.T) {
		r := w.book("general", "payments", "recreated")
		first := w.Live("payments", "recreated", r.ID)
		created(s, first)
		w.Remove(first)
		w.Clock.Step(time.Second) // a new UID
		again := w.Live("payments", "recreated", r.ID)
		created(s, again)
		if again.UID == first.UID {
			t.Fatal("the fixture gave both the same UID")
		}
		if rep := w.backfill(s); rep.Backfilled != 1 {
			t.Fatalf("report %+v", rep)
		}
		if e := w.Entry(r.ID); e.UID != string(again.UID) {
			t.Fatalf("uid %q, want the re-created Service's %q", e.UID, again.UID)
		}
	})
	t.Run("no longer a LoadBalancer", func(t *testing.T) {
		r := w.book("general", "payments", "clusterip")
		svc := w.Live("payments", "clusterip", r.ID)
		created(s, svc)
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		if err := w.Kube.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		if rep := w.backfill(s); rep.Backfilled != 0 || w.Entry(r.ID).UID != "" {
			t.Fatalf("a Service no longer live was back-filled: %+v", rep)
		}
	})
	t.Run("orphaned before the Service came", func(t *testing.T) {
		r := w.book("general", "payments", "late")
		w.sweep(s) // no Service yet: tagged orphaned
		if w.Entry(r.ID).OrphanedSince.IsZero() {
			t.Fatal("not tagged orphaned")
		}
		svc := w.Live("payments", "late", r.ID)
		created(s, svc)
		if rep := w.backfill(s); rep.Backfilled != 1 || rep.Untagged != 1 {
			t.Fatalf("report %+v", rep)
		}
		if e := w.Entry(r.ID); e.UID != string(svc.UID) || !e.OrphanedSince.IsZero() {
			t.Fatalf("ledger %+v", e)
		}
	})
}

// TestBackfillLeavesOthersToTheCycle: IDs that are not this Service's
// reservation in a pool are read and left alone.
func TestBackfillLeavesOthersToTheCycle(t *testing.T) {
	w := newWorld(t)
	s := w.sweeper()
	s.backfills.lead(true)
	theirs := w.book("general", "payments", "theirs") // another Service's
	w.sweep(s)                                        // tagged orphaned: the cycles, not the back-fill, clear it
	byo, _ := w.Srv.AddIP(w.PNs["edge"].ID, netip.MustParseAddr("10.10.9.4"), []string{"byo"}, nil)
	otherCluster, _ := w.Srv.AddIP(w.PNs["edge"].ID, netip.MustParseAddr("10.10.9.5"), ipam.Entry{Cluster: "staging", Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: "mixed"}}.Tags(), nil)
	// Our cluster's name on a network no pool uses: another cluster's.
	sameName, _ := w.Srv.AddIP(w.PNs["nodes"].ID, netip.MustParseAddr("172.16.0.50"), ipam.Entry{Cluster: "prod", Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: "mixed"}}.Tags(), nil)
	ids := []string{theirs.ID, byo, otherCluster, sameName, "5eeb0000-0000-4000-8000-00000000dead"}
	before := map[string][]string{}
	for _, id := range ids[:4] {
		ip, _ := w.Srv.IP(id)
		before[id] = ip.Tags
	}
	created(s, w.Live("payments", "mixed", ids...))
	w.Srv.ResetCounts()
	rep := w.backfill(s)
	if rep.Backfilled+rep.Untagged+rep.Errors != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := w.CallCounts(); got[emulator.OpGetIP] != len(ids) || len(got) != 1 {
		t.Fatalf("calls %v, want %d GetIP only", got, len(ids))
	}
	for id, tags := range before {
		if ip, _ := w.Srv.IP(id); !ipam.SameTags(ip.Tags, tags) {
			t.Fatalf("IP %s touched: %v → %v", id, tags, ip.Tags)
		}
	}
}

// TestBackfillErrorsAreCounted: a failed read or write is counted as the
// cycle's are and left to the next cycle, which writes the uid.
func TestBackfillErrorsAreCounted(t *testing.T) {
	w := newWorld(t)
	reg := prometheus.NewRegistry()
	s := w.sweeper(func(o *Options) { o.Metrics = NewMetrics(reg) })
	s.backfills.lead(true)
	r := w.book("general", "payments", "api")
	svc := w.Live("payments", "api", r.ID)
	created(s, svc)
	w.Srv.FailNext(emulator.OpUpdateIP, 10, emulator.Fault{Status: 500})
	if rep := w.backfill(s); rep.Errors != 1 || rep.Backfilled != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := testutil.ToFloat64(s.o.Metrics.errors); got != 1 {
		t.Fatalf("scw_lb_ipam_sweeper_errors_total %v, want 1", got)
	}
	w.Srv.FailNext(emulator.OpUpdateIP, 0, emulator.Fault{})
	if rep := w.sweep(s); rep.Backfilled != 1 || w.Entry(r.ID).UID != string(svc.UID) {
		t.Fatalf("the next cycle did not write the uid: %+v", rep)
	}
}

// tagHook runs before each SetTags.
type tagHook struct {
	scaleway.Cloud
	before func()
}

func (c tagHook) SetTags(ctx context.Context, id string, tags []string) (*scaleway.IP, error) {
	c.before()
	return c.Cloud.SetTags(ctx, id, tags)
}

// TestBackfillWaitsForACycleInFlight: a Service is created after a cycle
// listed its IP, and its round starts while that cycle is about to tag the
// IP orphaned (unreferenced in the cycle's live view). Were the round to
// write the uid in between, the cycle's tags, made from its listing, would
// erase the uid and mark a live Service's IP orphaned. The round waits for
// the cycle and leaves the uid written and orphaned-since cleared.
func TestBackfillWaitsForACycleInFlight(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "api")
	var s *Sweeper
	var svc *corev1.Service
	round := make(chan Report, 1)
	hooked := false
	s = w.sweeper(func(o *Options) {
		o.Cloud = tagHook{Cloud: w.Cloud, before: func() {
			if hooked {
				return
			}
			hooked = true
			svc = w.Live("payments", "api", r.ID)
			created(s, svc)
			go func() {
				rep, err := s.Backfill(context.Background())
				if err != nil {
					t.Error(err)
				}
				round <- rep
			}()
			// Room for a round that would not wait to run to its end.
			select {
			case rep := <-round:
				round <- rep
			case <-time.After(300 * time.Millisecond):
			}
		}}
	})
	s.backfills.lead(true)
	if rep := w.sweep(s); rep.Tagged != 1 {
		t.Fatalf("the cycle did not find the IP unreferenced: %+v", rep)
	}
	if rep := <-round; rep.Backfilled != 1 {
		t.Fatalf("round %+v", rep)
	}
	if e := w.Entry(r.ID); e.UID != string(svc.UID) || !e.OrphanedSince.IsZero() {
		t.Fatalf("ledger after the cycle and the round: uid %q (want %q), orphaned-since %v", e.UID, svc.UID, e.OrphanedSince)
	}
}

// TestStartBackfillsOnTheLeaderOnly: a replica that does not lead queues
// nothing; the leader back-fills a new Service a debounce after its
// creation without a cycle, and stops queueing when its term ends.
func TestStartBackfillsOnTheLeaderOnly(t *testing.T) {
	w := newWorld(t)
	w.retained(20)
	s := w.sweeper(func(o *Options) { o.Interval = time.Hour; o.Debounce = 5 * time.Second })
	r := w.book("general", "payments", "api")
	svc := w.Live("payments", "api", r.ID)
	created(s, svc)
	if n := s.backfills.queued(); n != 0 {
		t.Fatalf("a replica that does not lead queued %d Services", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	// The first cycle writes the uid of the Services that were there.
	waitFor(t, func() bool { return w.Entry(r.ID).UID != "" }, "the first cycle at start")

	late := w.book("general", "payments", "late")
	lateSvc := w.Live("payments", "late", late.ID)
	w.Srv.ResetCounts()
	// The informer's first listing replays existing Services: not queued.
	s.Handler().OnAdd(servicecache.NewRecord(lateSvc), true)
	if n := s.backfills.queued(); n != 0 {
		t.Fatalf("the initial listing queued %d Services", n)
	}
	created(s, lateSvc)
	waitFor(t, func() bool {
		w.Clock.Step(time.Second)
		return w.Entry(late.ID).UID == string(lateSvc.UID)
	}, "the back-fill of a new Service")
	if elapsed := w.Clock.Since(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)); elapsed >= time.Hour {
		t.Fatalf("written by the periodic cycle (%s), not the back-fill", elapsed)
	}
	if got := w.CallCounts(); got[emulator.OpListIPs] != 0 || got[emulator.OpGetIP] != 1 || got[emulator.OpUpdateIP] != 1 {
		t.Fatalf("calls %v, want one GetIP and one UpdateIP", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	created(s, w.Live("payments", "after", late.ID))
	if n := s.backfills.queued(); n != 0 {
		t.Fatalf("queued %d Services after the term ended", n)
	}
}

// queued reports how many Services wait for their back-fill.
func (q *backfillQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys)
}

// TestStartWaitsForTheServiceInformer: the leader's first cycle runs once
// the Service informer holds its first listing, not an Interval after a
// cycle that found it unsynced. The informer is a runnable of its own,
// started beside the sweeper, not before it as the manager's cache was.
func TestStartWaitsForTheServiceInformer(t *testing.T) {
	w := newWorld(t)
	var asked atomic.Int32
	s := w.sweeper(func(o *Options) {
		o.Interval = time.Hour
		o.Synced = func() bool { return asked.Add(1) > 3 }
	})
	r := w.book("general", "payments", "api")
	w.Live("payments", "api", r.ID)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	// The clock is not stepped: only a first cycle writes the uid.
	waitFor(t, func() bool { return w.Entry(r.ID).UID != "" }, "the first cycle once the informer synced")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
