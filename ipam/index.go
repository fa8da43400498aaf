package ipam

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// indexed is what a replica knows of one of this cluster's reservations
// without asking Scaleway. It is enough to choose which IP to re-read for a
// Service, never enough to hand one out: another replica or the sweeper may
// have changed it since.
type indexed struct {
	id       string
	address  netip.Addr
	pool     string
	service  types.NamespacedName
	used     bool // uid back-filled: a live Service had it
	orphaned time.Time
	// learned is when this replica learned it: the start of the listing
	// that showed it, or its own write.
	learned time.Time
}

// indexEntry reads ip's ledger tags; false for IPs of other clusters,
// resources or people.
func indexEntry(ip *scaleway.IP, cluster string, learned time.Time) (*indexed, bool) {
	e, ok := ParseEntry(ip.Tags)
	if !ok || !e.Owns(cluster) {
		return nil, false
	}
	return &indexed{id: ip.ID, address: ip.Address, pool: e.Pool, service: e.Service, used: e.UID != "",
		orphaned: e.OrphanedSince, learned: learned}, true
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
	x.drop(r.id)
	x.byID[r.id] = r
	m := x.byService[r.service]
	if m == nil {
		m = map[string]*indexed{}
		x.byService[r.service] = m
	}
	m[r.id] = r
}

func (x index) drop(id string) {
	r, ok := x.byID[id]
	if !ok {
		return
	}
	delete(x.byID, id)
	if m := x.byService[r.service]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(x.byService, r.service)
		}
	}
}

// of returns svc's reservations, by ID: the caller reads them all again
// and chooses among what it reads.
func (x index) of(svc types.NamespacedName) []*indexed {
	out := slices.Collect(maps.Values(x.byService[svc]))
	slices.SortFunc(out, func(a, b *indexed) int { return strings.Compare(a.id, b.id) })
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

// candidates are the IDs to re-read for req, in order of preference: the
// index's reservations of the Service in the pool, then the IDs the
// Service references (an UPDATE), then IDs the Service cache showed on a
// Service of that name that no listing has seen yet. known are all the
// IDs of the Service the allocator knows of; fresh is false when the
// pool's index is missing or older than the TTL.
func (a *Allocator) candidates(req Request) (ids []string, known map[string]bool, fresh bool) {
	o := a.existing(req.Pool)
	if o == nil {
		return nil, nil, false
	}
	known = map[string]bool{}
	add := func(id string) {
		if !known[id] {
			known[id] = true
			ids = append(ids, id)
		}
	}
	a.mu.Lock()
	hints := maps.Clone(a.hints[req.Service])
	a.mu.Unlock()
	cfg, now := a.Config(), a.clock.Now()
	o.mu.Lock()
	fresh = !o.loaded.IsZero() && now.Sub(o.loaded) < a.ttl
	for _, r := range o.mine.of(req.Service) {
		// A Service that showed the ID after the index learned its tags
		// may have taken it back since: its orphaned-since is stale.
		hintedLater := hints[r.id].After(r.learned)
		if req.Pool.Covers(r.address) && (!req.Address.IsValid() || r.address == req.Address) && (hintedLater || a.mayBeReusable(cfg, req.Pool.SubnetID(), r, now)) {
			add(r.id)
		} else {
			known[r.id] = true
		}
	}
	o.mu.Unlock()
	if !fresh {
		return nil, nil, false
	}
	for _, id := range req.Own {
		if !a.indexedElsewhere(id, req.Pool) {
			add(id)
		}
	}
	hinted := slices.Sorted(maps.Keys(hints))
	for _, id := range hinted {
		if !known[id] && !a.indexedElsewhere(id, req.Pool) {
			add(id)
		}
	}
	return ids, known, true
}

// mayBeReusable skips the re-read of a reservation the index knows to be
// past its reuse window (or in a pool without stickiness): its
// orphaned-since can only have been cleared since by a live Service, which
// would make it referenced. A stale answer costs stickiness, never
// correctness.
func (a *Allocator) mayBeReusable(cfg *Config, subnetID string, r *indexed, now time.Time) bool {
	e := Entry{Pool: r.pool, OrphanedSince: r.orphaned}
	if r.used {
		e.UID = "used"
	}
	p, _ := cfg.PoolOf(e, subnetID, r.address)
	return a.policy.Reusable(p, e, now)
}

// indexedElsewhere reports whether an index knows id as a reservation
// outside p's address space: not a candidate, no need to re-read it.
func (a *Allocator) indexedElsewhere(id string, p *Pool) bool {
	a.mu.Lock()
	views := make(map[string]*occupancy, len(a.occ))
	for subnet, o := range a.occ {
		views[subnet] = o
	}
	a.mu.Unlock()
	for subnet, o := range views {
		o.mu.Lock()
		r, ok := o.mine.byID[id]
		o.mu.Unlock()
		if ok && !p.Holds(subnet, r.address) {
			return true
		}
	}
	return false
}

// Remember records the IPAM IDs a Service references, as the Service cache
// shows them: written by any replica, they reach every replica's cache
// within moments, long before its next listing. A re-create of that
// Service re-reads them, so it gets its address back even when another
// replica booked it since this one last listed. No call is made; the IDs
// are dropped once a listing of every pool has run after them.
func (a *Allocator) Remember(svc types.NamespacedName, ids []string) {
	if len(ids) == 0 {
		return
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, byService := range []map[types.NamespacedName]map[string]time.Time{a.hints, a.shown} {
		m := byService[svc]
		if m == nil {
			m = map[string]time.Time{}
			byService[svc] = m
		}
		for _, id := range ids {
			m[id] = now
		}
	}
}

// Hinted returns the IDs the Service cache showed on svc that are still
// hints (no listing, re-read or release has accounted for them since):
// what a re-create of svc re-reads besides the index. For status and
// tests; admissions read the hints under their own lock.
func (a *Allocator) Hinted(svc types.NamespacedName) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.hints[svc]))
}

// learn records what a re-read sent at readAt showed: the index entry of
// one of this cluster's reservations, and the hint answered. It is dated
// from the read, not its answer: a listing that started in between saw
// newer tags.
func (a *Allocator) learn(svc types.NamespacedName, ip *scaleway.IP, readAt time.Time) {
	a.mu.Lock()
	if m := a.hints[svc]; m != nil {
		delete(m, ip.ID)
		if len(m) == 0 {
			delete(a.hints, svc)
		}
	}
	view := a.occ[ip.SubnetID]
	a.mu.Unlock()
	if view == nil {
		return
	}
	view.mu.Lock()
	defer view.mu.Unlock()
	if r, ok := indexEntry(ip, a.Config().ClusterName, readAt); ok {
		view.mine.put(r)
	} else {
		view.mine.drop(ip.ID)
	}
}

// forget drops an IP that is gone (released here or found missing) from
// every view, index and hint.
func (a *Allocator) forget(id string, addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, byService := range []map[types.NamespacedName]map[string]time.Time{a.hints, a.shown} {
		for svc, m := range byService {
			delete(m, id)
			if len(m) == 0 {
				delete(byService, svc)
			}
		}
	}
	for _, o := range a.occ {
		o.mu.Lock()
		if r, ok := o.mine.byID[id]; ok {
			addr = r.address
			o.mine.drop(id)
		}
		// Only if it still marks this IP: the address may be another
		// booking's by now, or a pick in flight.
		if h, ok := o.holders[addr]; ok && h.IPID == id {
			o.free(addr)
		}
		o.mu.Unlock()
	}
}

// dropHints forgets the hints recorded before since: a listing of every
// pool that started after them has put what they named in the indexes.
func (a *Allocator) dropHints(since time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for svc, m := range a.hints {
		for id, at := range m {
			if at.Before(since) {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(a.hints, svc)
		}
	}
	// What the listings have settled: a uid back-filled (the ledger tells
	// from now on), or no reservation any more.
	for svc, m := range a.shown {
		for id, at := range m {
			if !at.Before(since) {
				continue
			}
			indexed, used := false, false
			for _, o := range a.occ {
				o.mu.Lock()
				if r, ok := o.mine.byID[id]; ok {
					indexed, used = true, r.used
				}
				o.mu.Unlock()
			}
			if !indexed || used {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(a.shown, svc)
		}
	}
}
