package inventory

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// AskKey is one Service's request in one pool, for the pool or for the
// namespace's share of it (each judged from a listing of its own): a
// Service asking two full pools waits for a release in each.
type AskKey struct {
	Service types.NamespacedName
	Pool    string
	Of      string
}

// Asks are, per request, the reservation whose release was brought
// forward for it, and until when a retry waits for it rather than bringing
// another one forward. Per replica: a Service whose retries alternate
// between replicas brings at most one forward on each.
type Asks struct {
	// retryAfter is how long past its expected release an ask is kept.
	retryAfter time.Duration
	mu         sync.Mutex
	m          map[AskKey]askedRelease
}

type askedRelease struct {
	id    string
	until time.Time
}

// Waiting returns until when a retry of the request waits for the release
// brought forward for it (a second from now at least, once that is past),
// zero for none; it forgets those long past. Once the pool's holders all
// no longer include that reservation it was released: the request books,
// or, the pool full again, brings another forward.
func (v *Asks) Waiting(key AskKey, all []*ipam.Reservation, now time.Time) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	// Kept a while past the expected release: a slow cycle (or one at its
	// cap of releases) must not make the next retry bring another forward.
	for k, a := range v.m {
		if !now.Before(a.until.Add(v.retryAfter)) {
			delete(v.m, k)
		}
	}
	a, ok := v.m[key]
	if !ok {
		return time.Time{}
	}
	if !slices.ContainsFunc(all, func(h *ipam.Reservation) bool { return h.ID == a.id }) {
		delete(v.m, key)
		return time.Time{}
	}
	if soon := now.Add(time.Second); a.until.Before(soon) {
		return soon
	}
	return a.until
}

// Ask records that the release of id was brought forward for key, awaited
// until then.
func (v *Asks) Ask(key AskKey, id string, until time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[AskKey]askedRelease{}
	}
	v.m[key] = askedRelease{id: id, until: until}
}
