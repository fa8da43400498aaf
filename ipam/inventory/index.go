package inventory

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// indexed is what a replica knows of one of this cluster's reservations
// without asking Scaleway: its address and its holder as last read, ledger
// whole. It is enough to choose which IP to re-read for a Service, never
// enough to hand one out: another replica or the sweeper may have changed
// it since.
type indexed struct {
	addr netip.Addr
	ipam.Holder
	// learned is when this replica learned it: the start of the listing
	// that showed it, or its own write.
	learned time.Time
}

// indexOf is the index's entry for h at addr, learned then; false for IPs
// of other clusters, resources or people.
func indexOf(addr netip.Addr, h ipam.Holder, cluster string, learned time.Time) (*indexed, bool) {
	if !h.Owns(cluster) {
		return nil, false
	}
	return &indexed{addr: addr, Holder: h, learned: learned}, true
}

// index is the reservation index of one subnet: this cluster's
// reservations by ID and by Service. The occupancy listing rebuilds it,
// this replica's own bookings, take-backs and releases update it, so that
// a CREATE of a Service it holds nothing for books at once.
type index struct {
	byID      map[string]*indexed
	byService map[types.NamespacedName]map[string]*indexed
}

func newIndex() index {
	return index{byID: map[string]*indexed{}, byService: map[types.NamespacedName]map[string]*indexed{}}
}

func (x index) put(r *indexed) {
	x.drop(r.IPID)
	x.byID[r.IPID] = r
	m := x.byService[r.Service]
	if m == nil {
		m = map[string]*indexed{}
		x.byService[r.Service] = m
	}
	m[r.IPID] = r
}

// record indexes h at addr, one of this cluster's reservations; one that is
// no longer this cluster's is left as it is.
func (x index) record(addr netip.Addr, h ipam.Holder, cluster string, learned time.Time) {
	if r, mine := indexOf(addr, h, cluster, learned); mine {
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
func (x index) of(svc types.NamespacedName) []*indexed {
	out := slices.Collect(maps.Values(x.byService[svc]))
	slices.SortFunc(out, func(a, b *indexed) int { return strings.Compare(a.IPID, b.IPID) })
	return out
}

// rebuilt is the index after a listing that started at since: what was
// listed, except where this replica learned better after the listing
// started (its own bookings and take-backs may have been listed too early
// to show). A release listed too early comes back as an entry whose re-read
// finds nothing: it costs a call, never a wrong answer.
func (x index) rebuilt(listed []*indexed, since time.Time) index {
	y := newIndex()
	for _, r := range listed {
		y.put(r)
	}
	for _, r := range x.byID {
		if !r.learned.Before(since) {
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
func mayBeReusable(policy ipam.Retention, cfg *ipam.Config, subnetID string, r *indexed, now time.Time) bool {
	return policy.ReusableIn(cfg, r.Entry, subnetID, r.addr, now)
}

// indexedElsewhere reports whether one of the views' indexes knows id as a
// reservation outside p's address space: not a candidate, no need to
// re-read it.
func indexedElsewhere(views map[string]*occupancy, id string, p *ipam.Pool) bool {
	for subnet, o := range views {
		o.mu.Lock()
		r, ok := o.mine.byID[id]
		o.mu.Unlock()
		if ok && !p.Holds(subnet, r.addr) {
			return true
		}
	}
	return false
}
