package ipam

import (
	"cmp"
	"net/netip"
	"slices"
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
	attached bool
	created  time.Time
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
		orphaned: e.OrphanedSince, attached: ip.Resource != nil, created: ip.CreatedAt, learned: learned}, true
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

// of returns svc's reservations, those a live Service used first, then
// the oldest booking first: the sticky path's order of preference.
func (x index) of(svc types.NamespacedName) []*indexed {
	out := make([]*indexed, 0, len(x.byService[svc]))
	for _, r := range x.byService[svc] {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *indexed) int {
		if a.used != b.used {
			if a.used {
				return -1
			}
			return 1
		}
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.id, b.id))
	})
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
