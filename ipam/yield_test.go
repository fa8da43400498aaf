package ipam

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// barrierCloud holds every BookIP until n of them have been made: the
// admissions that all found one address left in their namespace's share
// book at the same moment.
type barrierCloud struct {
	scaleway.Cloud
	wg *sync.WaitGroup
}

func (c barrierCloud) BookIP(ctx context.Context, r scaleway.BookRequest) (*scaleway.IP, error) {
	c.wg.Done()
	c.wg.Wait()
	return c.Cloud.BookIP(ctx, r)
}

// TestShareHoldsAcrossReplicas: a namespace holding 2 of its share of 3,
// and three replicas admitting one Service each at once, every one of
// which counted 2 before any booked. Without the check after the booking
// the namespace would end at 5; with it, the newer bookings give theirs
// back and exactly one admission succeeds, in whatever order IPAM
// answered.
func TestShareHoldsAcrossReplicas(t *testing.T) {
	for run := range 5 {
		e, a := allocEnv(t, nil)
		p := pool(t, a, "auto")
		three := 3
		p.MaxPerNamespace = &three
		ctx := context.Background()
		for _, name := range []string{"a", "b"} {
			if _, err := a.Reserve(ctx, Request{Pool: p, Service: svc("ci", name)}); err != nil {
				t.Fatal(err)
			}
		}
		var barrier sync.WaitGroup
		barrier.Add(3)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range 3 {
			replica := NewAllocator(AllocatorOptions{Cloud: barrierCloud{Cloud: e.cloud, wg: &barrier}, Config: a.Config()})
			wg.Go(func() {
				_, errs[i] = replica.Reserve(ctx, Request{Pool: p, Service: svc("ci", string(rune('c'+i)))})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case ReasonOf(err) != ReasonYielding:
				t.Fatalf("run %d: %v, want a retryable refusal", run, err)
			}
		}
		held, err := a.yield.holdings(ctx, Request{Pool: p, Service: svc("ci", "any")})
		if err != nil {
			t.Fatal(err)
		}
		if ok != 1 || len(held) != 3 {
			t.Fatalf("run %d: %d admissions succeeded and namespace ci holds %d addresses; want 1 and its share of 3 (%v)", run, ok, len(held), errs)
		}
	}
}

// TestStaleReleaseAtIgnored: a release-at from an earlier retention (kept
// by a replica that did not know the tag when it took the IP back) does
// not cut the next retention short; one a full pool set does.
func TestStaleReleaseAtIgnored(t *testing.T) {
	r := Retention{PendingGrace: DefaultPendingGrace, Margin: 20 * time.Second}
	p := &Pool{Name: "p", Retention: Duration{Duration: 24 * time.Hour}}
	orphaned := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	stale := Entry{UID: "u", OrphanedSince: orphaned, ReleaseAt: orphaned.Add(-time.Hour)}
	if now := orphaned.Add(time.Minute); r.Expired(p, stale, now) || !r.Reusable(p, stale, now) {
		t.Fatalf("a stale release-at cut the retention short: expired=%v reusable=%v", r.Expired(p, stale, now), r.Reusable(p, stale, now))
	}
	yielded := r.Yield(stale, orphaned.Add(time.Hour))
	if at := orphaned.Add(time.Hour + 20*time.Second); !r.Expired(p, yielded, at) || r.Reusable(p, yielded, at.Add(-10*time.Second)) {
		t.Fatal("a release brought forward by a full pool is not honoured")
	}
}
