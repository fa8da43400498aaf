package ipam

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// HandoverRequest moves another cluster's retained reservations to the
// cluster of a pool file at once (a cluster migration): what a CREATE in a
// pool with adoptFrom does for one Service, for every Service that is gone.
type HandoverRequest struct {
	// From is the cluster whose reservations move; the pool file's
	// clusterName receives them.
	From string
	// Namespace, when set, moves that namespace's reservations only.
	Namespace string
	DryRun    bool
	// Now reads the clock (time.Now when nil). A run can last minutes: it
	// is read again right before each write, which judges the release time
	// and starts the receiving cluster's retention.
	Now func() time.Time
}

// Handed is one reservation handed over (or that would be, or was left).
type Handed struct {
	ID      string
	Address netip.Addr
	Service types.NamespacedName
	Pool    string
	// Skipped says why it was left after all; empty when it moved.
	Skipped string
}

// HandoverCandidate reports whether ip is one of From's retained
// reservations in a pool, and in which; one whose release is too close to
// move, or unknown, is reported skipped.
func HandoverCandidate(cfg *Config, policy Retention, req HandoverRequest, ip *Reservation) (Handed, *Pool, bool) {
	e := ip.Entry
	// The tag filter is a hint: the ledger decides.
	if !e.Owns(req.From) || e.OrphanedSince.IsZero() || (req.Namespace != "" && e.JudgedNamespace() != req.Namespace) {
		return Handed{}, nil, false
	}
	i := slices.IndexFunc(cfg.Pools, func(p *Pool) bool { return p.Holds(ip.SubnetID, ip.Address) })
	if i < 0 {
		return Handed{}, nil, false
	}
	h := Handed{ID: ip.ID, Address: ip.Address, Service: e.Service, Pool: cfg.Pools[i].Name}
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	h.Skipped = HandoverSkip(policy, cfg.Pools[i], e, req.From, now())
	return h, cfg.Pools[i], true
}

// HandoverSkip says why a retained reservation of cluster from may not
// move at now; empty when it may.
func HandoverSkip(policy Retention, p *Pool, e Entry, from string, now time.Time) string {
	switch {
	case policy.Adoptable(p, e, now):
		return ""
	case e.ReleaseAt.IsZero():
		return "cluster " + from + " retains it without a release time (an older scw-lb-ipam there): upgrade it, or wait for its sweeper to write one"
	case e.ReleaseAt.Before(e.OrphanedSince):
		return "its release time is stale (before it was retained); cluster " + from + "'s sweeper rewrites it"
	case e.untied:
		return "its release time was not written for this retention (another version of scw-lb-ipam wrote it); cluster " + from + "'s sweeper rewrites it"
	}
	return "its release by cluster " + from + " is due within the safety margin"
}
