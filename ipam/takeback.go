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
func (r Retention) TakesBack(cfg *Config, pool *Pool, svc types.NamespacedName, own []string, ip *scaleway.IP, refs []types.NamespacedName, now time.Time) bool {
	// The reservation's network and the pool's address space, not the
	// pool's name: a renamed pool keeps its Services' addresses.
	e, ok := ParseEntry(ip.Tags)
	if !ok || e.Service != svc || !pool.Holds(ip.SubnetID, ip.Address) {
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

// Preference orders the candidates of one Service: better reports whether
// ip is to be taken back rather than than. shown is when the Service cache
// last showed each ID on a Service of that name.
func Preference(cluster string, shown map[string]time.Time) (better func(ip, than *scaleway.IP) bool) {
	// Used (uid back-filled) first; then one a Service of that name showed
	// (the previous incarnation's, though no leader back-filled its uid
	// yet); then pending bookings. Within a rank the latest shown, among
	// used ones the last given up, then the oldest booking.
	rank := func(ip *scaleway.IP) int {
		e, _ := ParseEntry(ip.Tags)
		switch _, seen := shown[ip.ID]; {
		case e.UID != "":
			return 2
		case seen:
			return 1
		}
		return 0
	}
	ours := func(ip *scaleway.IP) bool {
		e, _ := ParseEntry(ip.Tags)
		return e.Owns(cluster)
	}
	return func(ip, than *scaleway.IP) bool {
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
			if o, ot := orphanedSince(ip), orphanedSince(than); !o.Equal(ot) {
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

func orphanedSince(ip *scaleway.IP) time.Time {
	e, _ := ParseEntry(ip.Tags)
	return e.OrphanedSince
}
