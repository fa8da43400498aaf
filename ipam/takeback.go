package ipam

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// TakesBack reports whether ip is a reservation of svc in pool that may be
// taken back at now: ours or one of a cluster the pool adopts from (live
// there or retained), referenced by no other live Service, attached to
// nothing but a Load Balancer (the caller refuses while it is), and not too
// close to its release. A reference by a Service of the same namespace/name
// does not count: it is the previous object, Terminating or gone but still
// in a lagging cache, since a CREATE of that name only succeeds once the old
// one is gone. own are the IDs the Service references itself (an UPDATE);
// refs are the live Services the cache shows referencing ip.
func (r Retention) TakesBack(cfg *Config, pool *Pool, svc types.NamespacedName, own []string, ip *Reservation, refs []types.NamespacedName, now time.Time) bool {
	// The reservation's network and the pool's address space, not the
	// pool's name: a renamed pool keeps its Services' addresses.
	e := ip.Entry
	if !ip.Ours() || e.Service != svc || !pool.Holds(ip.SubnetID, ip.Address) {
		return false
	}
	mine := e.Owns(cfg.ClusterName)
	if !mine && !slices.Contains(pool.AdoptFrom, e.Cluster) {
		return false
	}
	if mine && slices.Contains(own, ip.ID) {
		return true
	}
	for _, ref := range refs {
		if ref != svc {
			return false
		}
	}
	if ip.Resource != nil && ip.Resource.Type != scaleway.ResourceLoadBalancer {
		return false
	}
	if !mine {
		// Another cluster's release is judged from its ledger alone.
		return r.Adoptable(pool, e, now)
	}
	return r.ReusableIn(cfg, e, ip.SubnetID, ip.Address, now)
}

// Reusable reports whether an admission at now may take this cluster's
// reservation of pool p back: it is not orphaned, or its release is more
// than Margin away. A pool with retention 0 is not sticky, and a removed
// pool's reservations are never handed out again.
func (r Retention) Reusable(p *Pool, e Entry, now time.Time) bool {
	if e.OrphanedSince.IsZero() {
		return true
	}
	at, ok := r.When(p, e)
	return ok && p != nil && r.Of(p, e) > 0 && now.Add(r.Margin).Before(at)
}

// Adoptable reports whether pool p may take over another cluster's
// reservation at now (adoptFrom, handover): live there, or retained with a
// release-at more than Margin away. Only the tag tells another cluster's
// release: one without it (an older version's) is never adopted while
// retained, as this cluster's pool file says nothing of when the other
// releases it.
func (r Retention) Adoptable(p *Pool, e Entry, now time.Time) bool {
	if e.OrphanedSince.IsZero() {
		return true
	}
	return p != nil && e.scheduled() && !e.untied && now.Add(r.Margin).Before(e.ReleaseAt)
}

// HeldByPrevious decides a re-create whose reservation ip is still attached
// to a Load Balancer. While a Service of that name exists, the CREATE
// cannot succeed: a live one that references ip is refused as existing
// (the apiserver would refuse it too, so say that instead of "retry"), a
// Terminating one (the CCM's finalizer) retryably. Once the object is gone,
// nil: the re-create takes its reservation although the previous Load
// Balancer still holds it. Scaleway deletes a Load Balancer asynchronously,
// up to a minute after the CCM let the Service go; the CCM attaches the IP
// to the new Load Balancer once the old one lets go, where a refusal would
// outlast the client's retries. refs are the live Services referencing ip.
func HeldByPrevious(svc types.NamespacedName, ip *Reservation, refs []types.NamespacedName, exists bool) *Error {
	switch {
	case slices.Contains(refs, svc):
		return ServiceExists(svc, ip)
	case exists:
		return StillHeld(svc, ip)
	}
	return nil
}

// Preference orders the candidates of one Service: better reports whether
// ip is to be taken back rather than than. shown is when the Service cache
// last showed each ID on a Service of that name.
func Preference(cluster string, shown map[string]time.Time) (better func(ip, than *Reservation) bool) {
	// Used (uid back-filled) first; then one a Service of that name showed
	// (the previous incarnation's, though no leader back-filled its uid
	// yet); then pending bookings. Within a rank the latest shown, among
	// used ones the last given up, then the oldest booking.
	rank := func(ip *Reservation) int {
		switch _, seen := shown[ip.ID]; {
		case ip.UID != "":
			return 2
		case seen:
			return 1
		}
		return 0
	}
	ours := func(ip *Reservation) bool { return ip.Owns(cluster) }
	return func(ip, than *Reservation) bool {
		// This cluster's own reservation before one adopted from another.
		if o, ot := ours(ip), ours(than); o != ot {
			return o
		}
		r, rt := rank(ip), rank(than)
		if r != rt {
			return r > rt
		}
		if s, st := shown[ip.ID], shown[than.ID]; !s.Equal(st) {
			return s.After(st) // a moved Service's latest address
		}
		if r > 0 {
			// Both used: the one given up last was the previous
			// incarnation's (a Service moved with allow-ip-change gave up
			// its older address first); not orphaned yet counts as latest.
			if o, ot := ip.OrphanedSince, than.OrphanedSince; !o.Equal(ot) {
				return o.IsZero() || (!ot.IsZero() && o.After(ot))
			}
		}
		return ip.CreatedAt.Before(than.CreatedAt)
	}
}

// ReusableIn reports whether e, a reservation of this cluster at addr on
// subnetID, may be taken back at now, judged by its pool under cfg.
func (r Retention) ReusableIn(cfg *Config, e Entry, subnetID string, addr netip.Addr, now time.Time) bool {
	p, _ := cfg.PoolOf(e, subnetID, addr)
	return r.Reusable(p, e, now)
}
