package ipam

import "time"

// Verdict is what the sweeper does with one of this cluster's reservations
// that no live Service references (see Retention.Judge).
type Verdict int

const (
	// VerdictStart starts its retention: orphaned-since and release-at,
	// in one write of Start's entry, the clock read after a re-read.
	VerdictStart Verdict = iota
	// VerdictRewrite rewrites its ledger: a release time of its own
	// (Settle), the pool file's new retention (Follow), or the namespace
	// tag it lacks.
	VerdictRewrite
	// VerdictRetain keeps it until its release time.
	VerdictRetain
	// VerdictAttached keeps it although due: still attached, and the CCM
	// detaches an IP before it deletes the Load Balancer.
	VerdictAttached
	// VerdictRemovedPool keeps it although due: its pool left the pool
	// file, and the operator did not allow releasing those.
	VerdictRemovedPool
	// VerdictRelease releases it, after a re-read that finds it unchanged.
	VerdictRelease
)

var verdictNames = [...]string{"start", "rewrite", "retain", "attached", "removed-pool", "release"}

func (v Verdict) String() string { return verdictNames[v] }

// Judge is the sweeper's verdict on e, of pool p (nil when its pool left
// the pool file, see Config.PoolOf), attached or not to a resource: whether
// it is due is decided at the cycle's start, a release time to write from
// now. next is the ledger VerdictRewrite writes; for the others it is e.
func (r Retention) Judge(p *Pool, e Entry, attached, releaseRemovedPools bool, start, now time.Time) (v Verdict, next Entry) {
	switch {
	case e.OrphanedSince.IsZero():
		return VerdictStart, e
	case !r.Expired(p, e, start):
		next, changed := r.Settle(p, e, now)
		if !changed {
			next, changed = r.Follow(p, e, now)
		}
		if changed || !e.Complete() {
			return VerdictRewrite, next
		}
		return VerdictRetain, e
	case attached:
		return VerdictAttached, e
	case p == nil && !releaseRemovedPools:
		return VerdictRemovedPool, e
	}
	return VerdictRelease, e
}
