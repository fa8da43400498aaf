package inventory

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// sightings are IPAM IDs seen on Services, and when last.
type sightings map[types.NamespacedName]map[string]time.Time

func (s sightings) add(svc types.NamespacedName, ids []string, at time.Time) {
	m := s[svc]
	if m == nil {
		m = map[string]time.Time{}
		s[svc] = m
	}
	for _, id := range ids {
		m[id] = at
	}
}

// drop forgets id on svc, or on every Service when svc is nil.
func (s sightings) drop(svc *types.NamespacedName, id string) {
	for key, m := range s {
		if svc != nil && key != *svc {
			continue
		}
		delete(m, id)
		if len(m) == 0 {
			delete(s, key)
		}
	}
}

// dropBefore forgets the sightings older than since that settled says are
// settled.
func (s sightings) dropBefore(since time.Time, settled func(id string) bool) {
	for svc, m := range s {
		for id, at := range m {
			if at.Before(since) && settled(id) {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(s, svc)
		}
	}
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
	now := v.subnets.clock.Now()
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	v.hints.add(svc, ids, now)
	v.shown.add(svc, ids, now)
}

// Hinted returns the IDs the Service cache showed on svc that are still
// hints (no listing, re-read or release has accounted for them since):
// what a re-create of svc re-reads besides the index. For status and
// tests; admissions read the hints under their own lock.
func (v *Inventory) Hinted(svc types.NamespacedName) []string {
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	return slices.Sorted(maps.Keys(v.hints[svc]))
}

// ShownOn returns when the Service cache last showed each ID on svc.
func (v *Inventory) ShownOn(svc types.NamespacedName) map[string]time.Time {
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	return maps.Clone(v.shown[svc])
}

// Learn records what a re-read showed: the index entry of one of this
// cluster's reservations, and the hint answered. It is dated from the
// read (ReadAt: when it was sent), not its answer: a listing that started
// in between saw newer tags.
func (v *Inventory) Learn(svc types.NamespacedName, ip *ipam.Reservation) {
	v.subnets.mu.Lock()
	v.hints.drop(&svc, ip.ID)
	view := v.subnets.occ[ip.SubnetID]
	v.subnets.mu.Unlock()
	if view == nil {
		return
	}
	view.mu.Lock()
	defer view.mu.Unlock()
	if mine(ip, v.Config().ClusterName) {
		view.mine.put(ip)
	} else {
		view.mine.drop(ip.ID)
	}
}

// Forget drops an IP that is gone (released here or found missing) from
// every view, index and hint.
func (v *Inventory) Forget(id string, addr netip.Addr) {
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	v.hints.drop(nil, id)
	v.shown.drop(nil, id)
	for _, o := range v.subnets.occ {
		o.mu.Lock()
		if r, ok := o.mine.byID[id]; ok {
			addr = r.Address
			o.mine.drop(id)
		}
		// Only if it still marks this IP: the address may be another
		// booking's by now, or a pick in flight.
		if h, ok := o.holders[addr]; ok && h.ID == id {
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
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	v.hints.dropBefore(since, func(string) bool { return true })
	v.shown.dropBefore(since, func(id string) bool {
		indexed, used := false, false
		for _, o := range v.subnets.occ {
			o.mu.Lock()
			if r, ok := o.mine.byID[id]; ok {
				indexed, used = true, r.UID != ""
			}
			o.mu.Unlock()
		}
		return !indexed || used
	})
}

// Knows reports which Service and pool the index holds the reservation id
// for, in any pool's subnet.
func (v *Inventory) Knows(id string) (svc types.NamespacedName, pool string, ok bool) {
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	for _, o := range v.subnets.occ {
		o.mu.Lock()
		r, found := o.mine.byID[id]
		o.mu.Unlock()
		if found {
			return r.Service, r.Pool, true
		}
	}
	return types.NamespacedName{}, "", false
}

// Hints is the number of Services with hints kept.
func (v *Inventory) Hints() int {
	v.subnets.mu.Lock()
	defer v.subnets.mu.Unlock()
	return len(v.hints)
}
