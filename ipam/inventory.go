package ipam

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// InventoryOptions configures NewInventory.
type InventoryOptions struct {
	Cloud  scaleway.Cloud
	Config *Config // validated and resolved
	// Retention tells which indexed reservations are worth re-reading:
	// those an admission may still take back.
	Retention Retention
	// Clock reads the time and paces the background refresh (Start).
	Clock clock.WithTicker
	// OccupancyTTL is how long a listing of a subnet's booked addresses is
	// trusted: past it, a pick lists the subnet again and the sticky lookup
	// lists the Service's reservations instead of reading the index.
	// Conflicts refresh sooner.
	OccupancyTTL time.Duration
	// RefreshInterval paces the background listing (Start) that keeps the
	// occupancy views and reservation indexes fresh; default a fifth of
	// the TTL.
	RefreshInterval time.Duration
	// Rand returns a number in [0, n): where picking goes on in a pool
	// after a conflict. Default math/rand/v2.
	Rand func(n uint64) uint64
	Log  logr.Logger
}

// Inventory is what one replica knows of the pools without asking
// Scaleway: each subnet's occupancy view, the index of this cluster's
// reservations, and the IDs the Service cache showed on Services. It owns
// all the locking of that state; no lock is held across a Scaleway call.
// Start keeps it fresh in the background; the Allocator reads and updates
// it through a few intent-named methods and decides.
type Inventory struct {
	cloud   scaleway.Cloud
	policy  Retention
	clock   clock.WithTicker
	rand    func(n uint64) uint64
	ttl     time.Duration
	refresh time.Duration
	log     logr.Logger
	cfg     atomic.Pointer[Config]

	mu  sync.Mutex
	occ map[string]*occupancy // by subnet ID
	// hints are IDs the Service cache showed on a Service (Remember), kept
	// until a listing of every pool has seen them.
	hints sightings
	// shown are the IDs the Service cache showed on each Service, and when
	// last: unlike hints they outlive re-reads and listings, until a listing
	// shows the uid back-filled or the IP gone. When no uid tells a
	// re-created Service's reservations apart (the sweeper's leader died
	// before back-filling it), the one its previous incarnation showed wins
	// over a pending booking.
	shown sightings
	// firstListing is closed once Start's first listing of the pools ended.
	firstListing chan struct{}
	firstOnce    sync.Once
	// joined, in tests, is called when a caller waits on a listing in
	// flight instead of starting one.
	joined func()
}

// NewInventory returns an Inventory over a resolved Config; it knows
// nothing until its first listing (Start or Refresh).
func NewInventory(o InventoryOptions) *Inventory {
	v := &Inventory{cloud: o.Cloud, policy: o.Retention, clock: o.Clock, rand: o.Rand, ttl: o.OccupancyTTL, refresh: o.RefreshInterval, log: o.Log,
		occ: map[string]*occupancy{}, hints: sightings{}, shown: sightings{}, firstListing: make(chan struct{})}
	if v.policy.PendingGrace == 0 {
		v.policy.PendingGrace = DefaultPendingGrace
	}
	if v.clock == nil {
		v.clock = clock.RealClock{}
	}
	if v.ttl == 0 {
		v.ttl = 5 * time.Minute
	}
	if v.refresh == 0 {
		v.refresh = v.ttl / 5
	}
	if v.rand == nil {
		v.rand = rand.Uint64N
	}
	v.cfg.Store(o.Config)
	return v
}

// Config is the configuration in use.
func (v *Inventory) Config() *Config { return v.cfg.Load() }

// SetConfig swaps in a new validated and resolved configuration. Pick state
// is rebuilt from the next listing, as ranges may have changed.
func (v *Inventory) SetConfig(c *Config) {
	v.cfg.Store(c)
	v.mu.Lock()
	v.occ = map[string]*occupancy{}
	v.mu.Unlock()
}

// NeedLeaderElection is false: every webhook replica picks addresses and
// needs its own fresh view.
func (v *Inventory) NeedLeaderElection() bool { return false }

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
