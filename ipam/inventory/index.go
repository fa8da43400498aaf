package inventory

import (
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// mine reports whether r is one of cluster's reservations, the only ones
// the index keeps. An entry is what a replica knows of it without asking
// Scaleway: its address and ledger as last read, and when (ReadAt: the
// start of the listing that showed it, or this replica's own write). It
// is enough to choose which IP to re-read for a Service, never enough to
// hand one out: another replica or the sweeper may have changed it since.
func mine(r *ipam.Reservation, cluster string) bool { return r.Owns(cluster) }

// index is the reservation index of one subnet: this cluster's
// reservations by ID and by Service. The occupancy listing rebuilds it,
// this replica's own bookings, take-backs and releases update it, so that
// a CREATE of a Service it holds nothing for books at once.
type index struct {
	byID      map[string]*ipam.Reservation
	byService map[types.NamespacedName]map[string]*ipam.Reservation
}

func newIndex() index {
	return index{byID: map[string]*ipam.Reservation{}, byService: map[types.NamespacedName]map[string]*ipam.Reservation{}}
}

func (x index) put(r *ipam.Reservation) {
	x.drop(r.ID)
	x.byID[r.ID] = r
	m := x.byService[r.Service]
	if m == nil {
		m = map[string]*ipam.Reservation{}
		x.byService[r.Service] = m
	}
	m[r.ID] = r
}

// record indexes r, one of this cluster's reservations; one that is no
// longer this cluster's is left as it is.
func (x index) record(r *ipam.Reservation, cluster string) {
	if mine(r, cluster) {
		x.put(r)
	}
}

func (x index) drop(id string) {
	r, ok := x.byID[id]
	if !ok {
		return
	}
	delete(x.byID, id)
	if m := x.byService[r.Service]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(x.byService, r.Service)
		}
	}
}

// of returns svc's reservations, by ID: the caller reads them all again
// and chooses among what it reads.
func (x index) of(svc types.NamespacedName) []*ipam.Reservation {
	out := slices.Collect(maps.Values(x.byService[svc]))
	slices.SortFunc(out, func(a, b *ipam.Reservation) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// rebuilt is the index after a listing that started at since: what was
// listed, except where this replica learned better after the listing
// started (its own bookings and take-backs may have been listed too early
// to show). A release listed too early comes back as an entry whose re-read
// finds nothing: it costs a call, never a wrong answer.
func (x index) rebuilt(listed []*ipam.Reservation, since time.Time) index {
	y := newIndex()
	for _, r := range listed {
		y.put(r)
	}
	for _, r := range x.byID {
		if !r.ReadAt.Before(since) {
			y.put(r)
		}
	}
	return y
}

// mayBeReusable skips the re-read of a reservation the index knows to be
// past its reuse window (or in a pool without stickiness): its
// orphaned-since can only have been cleared since by a live Service, which
// would make it referenced. A stale answer costs stickiness, never
// correctness.
func mayBeReusable(policy ipam.Retention, cfg *ipam.Config, subnetID string, r *ipam.Reservation, now time.Time) bool {
	return policy.ReusableIn(cfg, r.Entry, subnetID, r.Address, now)
}

// indexedElsewhere reports whether one of the views' indexes knows id as a
// reservation outside p's address space: not a candidate, no need to
// re-read it.
func indexedElsewhere(views map[string]*occupancy, id string, p *ipam.Pool) bool {
	for subnet, o := range views {
		o.mu.Lock()
		r, ok := o.mine.byID[id]
		o.mu.Unlock()
		if ok && !p.Holds(subnet, r.Address) {
			return true
		}
	}
	return false
}
