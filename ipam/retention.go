package ipam

import (
	"fmt"
	"time"
)

// DefaultPendingGrace is the retention of a reservation whose Service was
// never created (its admission booked, then the create failed).
const DefaultPendingGrace = 10 * time.Minute

// Retention is the release protocol that admissions and the sweeper share,
// so that they never both act on one retained IP:
//
//	orphaned-since ─────────────── release-Margin ──────── release ───▶
//	  admissions may take it back │ nobody touches it │ the sweeper may release it
//
// An admission takes a retained IP back only while its release is more than
// Margin away; the sweeper releases only once the release time has passed.
// Margin is at least twice the admission deadline, so an admission that
// decided to take an IP back has written its tags (or given up) long before
// the sweeper may decide to release it, and the sweeper's re-read sees them.
//
// A full pool brings one retained reservation's release forward (Yield): an
// admission sets release-at to Margin from now, which moves the whole dead
// zone to start now, so the same argument holds for the earlier release.
type Retention struct {
	// PendingGrace is how long a reservation whose Service never existed
	// (no uid back-filled) is kept once unreferenced.
	PendingGrace time.Duration
	// Margin is the dead zone before a release; see above.
	Margin time.Duration
	// SweepInterval is how often the leader's sweeper looks: a reservation
	// is released at most that long after its release is due. It only
	// words the retry of a refusal (Yield); zero means a minute.
	SweepInterval time.Duration
}

// Of is how long an unreferenced reservation of pool p is kept after
// orphaned-since; p is nil when its pool is no longer in the pool file (see
// Config.PoolOf, which admissions and the sweeper both resolve it with).
func (r Retention) Of(p *Pool, e Entry) time.Duration {
	switch {
	case e.UID == "":
		return r.PendingGrace
	case p != nil:
		return p.Retention.Duration
	}
	return DefaultRetention
}

// Reusable reports whether an admission at now may take the reservation of
// pool p back: it is not orphaned, or its release is more than Margin away.
// A pool with retention 0 is not sticky, and a removed pool's reservations
// are never handed out again.
func (r Retention) Reusable(p *Pool, e Entry, now time.Time) bool {
	if e.OrphanedSince.IsZero() {
		return true
	}
	return p != nil && r.Of(p, e) > 0 && now.Add(r.Margin).Before(r.release(p, e))
}

// release is when the sweeper may release an orphaned reservation: after
// its retention, or at its release-at when a full pool brought it forward.
func (r Retention) release(p *Pool, e Entry) time.Time {
	at := e.OrphanedSince.Add(r.Of(p, e))
	// Yield sets release-at at least two margins after orphaned-since;
	// one earlier is left from another retention, and ignored.
	if !e.ReleaseAt.IsZero() && e.ReleaseAt.Before(at) && !e.ReleaseAt.Before(e.OrphanedSince.Add(r.Margin)) {
		return e.ReleaseAt
	}
	return at
}

// Yieldable reports whether a full pool may bring the release of a
// retained reservation forward at now: it is not already inside its
// dead zone (then it is being released anyway), and it was not orphaned
// within the last Margin, when the likeliest client is a re-create of
// the Service that just went away (a Helm upgrade, a replace) taking it
// back at this very moment.
func (r Retention) Yieldable(p *Pool, e Entry, now time.Time) bool {
	return !e.OrphanedSince.IsZero() && !now.Before(e.OrphanedSince.Add(r.Margin)) && r.Reusable(p, e, now)
}

// Yield is e with its release brought forward to Margin after now: every
// admission that reads it from now on finds it inside its dead zone.
func (r Retention) Yield(e Entry, now time.Time) Entry {
	e.ReleaseAt = now.Add(r.Margin)
	return e
}

// Releasing reports whether the reservation's release is due within
// Margin of now: nobody takes it back any more, and the sweeper releases
// it once due.
func (r Retention) Releasing(p *Pool, e Entry, now time.Time) bool {
	return !e.OrphanedSince.IsZero() && !now.Add(r.Margin).Before(r.release(p, e))
}

// RetryAfter is about how long until a reservation yielding at now is
// released: its dead zone, then the sweeper's next look.
func (r Retention) RetryAfter() time.Duration {
	interval := r.SweepInterval
	if interval <= 0 {
		interval = time.Minute
	}
	return r.Margin + interval
}

// Expired reports whether the sweeper at now may release the reservation of
// pool p.
func (r Retention) Expired(p *Pool, e Entry, now time.Time) bool {
	if e.OrphanedSince.IsZero() {
		return false
	}
	return !now.Before(r.release(p, e))
}

// Check refuses retentions that leave no reuse window: a non-zero retention
// or a pending grace not longer than the margin (equal to it, an admission
// could take nothing back: the dead zone starts at orphaned-since).
func (r Retention) Check(cfg *Config) error {
	var errs []error
	for i, p := range cfg.Pools {
		if d := p.Retention.Duration; d > 0 && d <= r.Margin {
			errs = append(errs, fmt.Errorf("pools[%d] (%s).retention: %s is not longer than the reuse safety margin %s (twice the webhook timeout), so nothing could be taken back; use 0 for no stickiness or more than %s", i, p.Name, d, r.Margin, r.Margin))
		}
	}
	if r.PendingGrace <= r.Margin {
		errs = append(errs, fmt.Errorf("the pending grace %s is not longer than the reuse safety margin %s (twice the webhook timeout), so nothing could be taken back; use more than %s", r.PendingGrace, r.Margin, r.Margin))
	}
	if len(errs) > 0 {
		return fmt.Errorf("pool file is invalid:\n  %w", joinIndented(errs))
	}
	return nil
}
