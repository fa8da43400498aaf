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
//	orphaned-since ─────────────── release-at − Margin ──── release-at ───▶
//	  admissions may take it back │ nobody touches it │ the sweeper may release it
//
// The ledger says when: whoever starts a retention (the sweeper, handover)
// writes release-at with orphaned-since, and every reader judges against
// that tag, never against its own pool file, pending grace or flags, which
// may differ (another cluster, another version, an edited pool file). An
// admission takes a retained IP back only while release-at is more than
// Margin away; the sweeper releases only once it has passed. Margin is at
// least twice the admission deadline, so an admission that decided to take
// an IP back has written its tags (or given up) long before the sweeper may
// decide to release it, and the sweeper's re-read sees them.
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
// orphaned-since, by this install's pool file and flags: what the sweeper
// writes as release-at when it starts a retention. p is nil when its pool
// is no longer in the pool file (see Config.PoolOf).
func (r Retention) Of(p *Pool, e Entry) time.Duration {
	switch {
	case e.UID == "":
		return r.PendingGrace
	case p != nil:
		return p.Retention.Duration
	}
	return DefaultRetention
}

// Start is e retained from now: orphaned-since and release-at in one write.
// Both are whole seconds, as the tags hold them: read back, release-at is
// orphaned-since plus the retention exactly (see Follow).
func (r Retention) Start(p *Pool, e Entry, now time.Time) Entry {
	e.OrphanedSince = ceilSecond(now)
	e.ReleaseAt = e.OrphanedSince.Add(r.Of(p, e))
	e.Early = false
	return e
}

// Follow is the sweeper's rewrite of a retained reservation's release-at
// after the pool file changed its retention (or the pending grace): later
// at any time, earlier only to a time more than Margin from now, as an
// early release does, so that an admission that read the old time never
// takes back an IP being released. A release a full pool brought forward
// is left as it is. changed is false when there is nothing to rewrite.
func (r Retention) Follow(p *Pool, e Entry, now time.Time) (followed Entry, changed bool) {
	if !e.scheduled() || e.Early {
		return e, false
	}
	at := e.ReleaseAt
	want := ceilSecond(e.OrphanedSince.Add(r.Of(p, e)))
	if want.Before(at) {
		// Earlier: never into the dead zone of an admission that read at.
		want = later(want, ceilSecond(now.Add(r.Margin)))
		if !want.Before(at) {
			return e, false
		}
	}
	if want.Equal(at) {
		return e, false
	}
	e.ReleaseAt = want
	return e, true
}

// When is the release time of one of this cluster's retained reservations:
// its release-at. One retained by an older version has none yet: this
// cluster computes it from its own pool file until the sweeper writes it
// (Settle). ok is false when there is no time to act on: not retained, or
// a release-at before orphaned-since (stale: left by an older version or
// a hand edit), which nobody acts on until the sweeper rewrites it.
func (r Retention) When(p *Pool, e Entry) (at time.Time, ok bool) {
	if e.OrphanedSince.IsZero() {
		return time.Time{}, false
	}
	if e.ReleaseAt.IsZero() {
		return e.OrphanedSince.Add(r.Of(p, e)), true
	}
	if e.untied && e.scheduled() {
		// Written by another version's rules (see ParseEntry): the
		// earlier of its time and this cluster's, as that version
		// releases it (a release it brought forward) and as every
		// replica then reads it, so none takes the IP back inside the
		// dead zone of another's release.
		return earlier(e.ReleaseAt, e.OrphanedSince.Add(r.Of(p, e))), true
	}
	return e.ReleaseAt, e.scheduled()
}

// Settle is the sweeper's rewrite of a retained entry's release time when
// the ledger lacks one of its own (see When): an older version's gets the
// time this cluster already computed for it; one another version wrote
// (untied) the time every reader already uses, marked early when it is
// before this cluster's; a stale one this cluster's time. The last two
// never less than Margin from now, as nobody may take it back meanwhile.
// changed is false when e already has a release time of its own.
func (r Retention) Settle(p *Pool, e Entry, now time.Time) (settled Entry, changed bool) {
	if e.OrphanedSince.IsZero() || e.scheduled() && !e.untied {
		return e, false
	}
	own := e.OrphanedSince.Add(r.Of(p, e))
	at := own
	switch {
	case e.scheduled():
		// Another version's release time (see When), kept where every
		// reader already expects it; one brought forward stays early.
		at, _ = r.When(p, e)
		e.Early = e.Early || at.Before(own)
		at = later(at, now.Add(r.Margin))
	case !e.ReleaseAt.IsZero():
		at = later(at, now.Add(r.Margin))
	}
	e.ReleaseAt, e.untied = at, false
	return e, true
}

// Releasing reports whether the reservation's release is due within
// Margin of now: nobody takes it back any more, and the sweeper releases
// it once due.
func (r Retention) Releasing(p *Pool, e Entry, now time.Time) bool {
	at, ok := r.When(p, e)
	return ok && !now.Add(r.Margin).Before(at)
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
	at, ok := r.When(p, e)
	return ok && !now.Before(at)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
