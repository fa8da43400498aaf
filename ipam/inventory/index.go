package inventory

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
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
	// releaseAt is the ledger's release-at (see Entry.ReleaseAt).
	releaseAt time.Time
	// learned is when this replica learned it: the start of the listing
	// that showed it, or its own write.
	learned time.Time
}

// indexEntry reads ip's ledger tags; false for IPs of other clusters,
// resources or people.
func indexEntry(ip *scaleway.IP, cluster string, learned time.Time) (*indexed, bool) {
	e, ok := ipam.ParseEntry(ip.Tags)
	if !ok || !e.Owns(cluster) {
		return nil, false
	}
	return &indexed{id: ip.ID, address: ip.Address, pool: e.Pool, service: e.Service, used: e.UID != "",
		orphaned: e.OrphanedSince, releaseAt: e.ReleaseAt, learned: learned}, true
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
// IDs of the Service the inventory knows of; fresh is false when the
// pool's index is missing or older than the TTL.
func (v *Inventory) Candidates(req ipam.Request) (ids []string, known map[string]bool, fresh bool) {
	o := v.existing(req.Pool)
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
	v.mu.Lock()
	hints := maps.Clone(v.hints[req.Service])
	views := maps.Clone(v.occ)
	v.mu.Unlock()
	cfg, now := v.Config(), v.clock.Now()
	o.mu.Lock()
	fresh = !o.loaded.IsZero() && now.Sub(o.loaded) < v.ttl
	for _, r := range o.mine.of(req.Service) {
		// A Service that showed the ID after the index learned its tags
		// may have taken it back since: its orphaned-since is stale.
		hintedLater := hints[r.id].After(r.learned)
		if req.Pool.Covers(r.address) && (!req.Address.IsValid() || r.address == req.Address) && (hintedLater || mayBeReusable(v.policy, cfg, req.Pool.SubnetID(), r, now)) {
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
		if !indexedElsewhere(views, id, req.Pool) {
			add(id)
		}
	}
	hinted := slices.Sorted(maps.Keys(hints))
	for _, id := range hinted {
		if !known[id] && !indexedElsewhere(views, id, req.Pool) {
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
func mayBeReusable(policy ipam.Retention, cfg *ipam.Config, subnetID string, r *indexed, now time.Time) bool {
	e := ipam.Entry{Pool: r.pool, OrphanedSince: r.orphaned, ReleaseAt: r.releaseAt}
	if r.used {
		e.UID = "used"
	}
	return policy.ReusableIn(cfg, e, subnetID, r.address, now)
}

// indexedElsewhere reports whether one of the views' indexes knows id as a
// reservation outside p's address space: not a candidate, no need to
// re-read it.
func indexedElsewhere(views map[string]*occupancy, id string, p *ipam.Pool) bool {
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
func (v *Inventory) Remember(svc types.NamespacedName, ids []string) {
	if len(ids) == 0 {
		return
	}
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hints.add(svc, ids, now)
	v.shown.add(svc, ids, now)
}

// Hinted returns the IDs the Service cache showed on svc that are still
// hints (no listing, re-read or release has accounted for them since):
// what a re-create of svc re-reads besides the index. For status and
// tests; admissions read the hints under their own lock.
func (v *Inventory) Hinted(svc types.NamespacedName) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(maps.Keys(v.hints[svc]))
}

// shownOn returns when the Service cache last showed each ID on svc.
func (v *Inventory) ShownOn(svc types.NamespacedName) map[string]time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.shown[svc])
}

// learn records what a re-read sent at readAt showed: the index entry of
// one of this cluster's reservations, and the hint answered. It is dated
// from the read, not its answer: a listing that started in between saw
// newer tags.
func (v *Inventory) Learn(svc types.NamespacedName, ip *scaleway.IP, readAt time.Time) {
	v.mu.Lock()
	v.hints.drop(&svc, ip.ID)
	view := v.occ[ip.SubnetID]
	v.mu.Unlock()
	if view == nil {
		return
	}
	view.mu.Lock()
	defer view.mu.Unlock()
	if r, ok := indexEntry(ip, v.Config().ClusterName, readAt); ok {
		view.mine.put(r)
	} else {
		view.mine.drop(ip.ID)
	}
}

// forget drops an IP that is gone (released here or found missing) from
// every view, index and hint.
func (v *Inventory) Forget(id string, addr netip.Addr) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hints.drop(nil, id)
	v.shown.drop(nil, id)
	for _, o := range v.occ {
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
// Of the IDs shown, it forgets what those listings have settled: a uid
// back-filled (the ledger tells from now on), or no reservation any more.
func (v *Inventory) dropHints(since time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hints.dropBefore(since, func(string) bool { return true })
	v.shown.dropBefore(since, func(id string) bool {
		indexed, used := false, false
		for _, o := range v.occ {
			o.mu.Lock()
			if r, ok := o.mine.byID[id]; ok {
				indexed, used = true, r.used
			}
			o.mu.Unlock()
		}
		return !indexed || used
	})
}

// Knows reports which Service and pool the index holds the reservation id
// for, in any pool's subnet.
func (v *Inventory) Knows(id string) (svc types.NamespacedName, pool string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, o := range v.occ {
		o.mu.Lock()
		r, found := o.mine.byID[id]
		o.mu.Unlock()
		if found {
			return r.service, r.pool, true
		}
	}
	return types.NamespacedName{}, "", false
}

// Hints is the number of Services with hints kept.
func (v *Inventory) Hints() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.hints)
}
