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
type Retention struct {
	// PendingGrace is how long a reservation whose Service never existed
	// (no uid back-filled) is kept once unreferenced.
	PendingGrace time.Duration
	// Margin is the dead zone before a release; see above.
	Margin time.Duration
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
	d := r.Of(p, e)
	return p != nil && d > 0 && now.Add(r.Margin).Before(e.OrphanedSince.Add(d))
}

// Expired reports whether the sweeper at now may release the reservation of
// pool p.
func (r Retention) Expired(p *Pool, e Entry, now time.Time) bool {
	if e.OrphanedSince.IsZero() {
		return false
	}
	return !now.Before(e.OrphanedSince.Add(r.Of(p, e)))
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
