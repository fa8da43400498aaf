package inventory

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Options configures New.
type Options struct {
	Cloud  scaleway.Cloud
	Config *ipam.Config // validated and resolved
	// Retention tells which indexed reservations are worth re-reading:
	// those an admission may still take back.
	Retention ipam.Retention
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
	// Joined, when set, is called when a caller waits on a listing in
	// flight instead of starting one: tests drive that interleaving by it.
	Joined func()
}

// DefaultOccupancyTTL is how long a listing is trusted by default.
const DefaultOccupancyTTL = 5 * time.Minute

// Inventory is what one replica knows of the pools without asking
// Scaleway: each subnet's occupancy view, the index of this cluster's
// reservations, and the IDs the Service cache showed on Services. It owns
// all the locking of that state; no lock is held across a Scaleway call.
// Start keeps it fresh in the background; the Allocator reads and updates
// it through a few intent-named methods and decides.
type Inventory struct {
	// subnets are the subnets' occupancy views; their lock guards hints
	// and shown too.
	subnets Subnets
	policy  ipam.Retention
	refresh time.Duration
	log     logr.Logger
	cfg     atomic.Pointer[ipam.Config]

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
	// asks are the releases brought forward for requests.
	asks Asks
}

// Subnets are the occupancy views of the pools' subnets: what picking, the
// holders of a full pool and the reservation index read. The allocator
// reaches them through Inventory.Subnets.
type Subnets struct {
	cloud scaleway.Cloud
	clock clock.WithTicker
	rand  func(n uint64) uint64
	ttl   time.Duration
	// cfg is the Inventory's configuration in use.
	cfg *atomic.Pointer[ipam.Config]
	// joined is called when a caller waits on a listing in flight instead
	// of starting one.
	joined func()

	mu  sync.Mutex
	occ map[string]*occupancy // by subnet ID
}

// New returns an Inventory over a resolved Config; it knows
// nothing until its first listing (Start or Refresh).
func New(o Options) *Inventory {
	v := &Inventory{subnets: Subnets{cloud: o.Cloud, clock: o.Clock, rand: o.Rand, ttl: o.OccupancyTTL, joined: o.Joined, occ: map[string]*occupancy{}},
		policy: o.Retention, refresh: o.RefreshInterval, log: o.Log, hints: sightings{}, shown: sightings{}, firstListing: make(chan struct{})}
	v.subnets.cfg = &v.cfg
	if v.policy.PendingGrace == 0 {
		v.policy.PendingGrace = ipam.DefaultPendingGrace
	}
	if v.subnets.clock == nil {
		v.subnets.clock = clock.RealClock{}
	}
	if v.subnets.ttl == 0 {
		v.subnets.ttl = DefaultOccupancyTTL
	}
	if v.refresh == 0 {
		v.refresh = v.subnets.ttl / 5
	}
	if v.subnets.rand == nil {
		v.subnets.rand = rand.Uint64N
	}
	v.cfg.Store(o.Config)
	v.asks.retryAfter = v.policy.RetryAfter()
	return v
}

// Subnets are the pools' subnets as this replica knows them: which address
// is free, who holds one, what a write just changed.
func (v *Inventory) Subnets() *Subnets { return &v.subnets }

// Config is the configuration in use.
func (v *Inventory) Config() *ipam.Config { return v.cfg.Load() }

// SetConfig swaps in a new validated and resolved configuration. Pick state
// is rebuilt from the next listing, as ranges may have changed.
func (v *Inventory) SetConfig(c *ipam.Config) {
	v.cfg.Store(c)
	v.subnets.mu.Lock()
	v.subnets.occ = map[string]*occupancy{}
	v.subnets.mu.Unlock()
}

// NeedLeaderElection is false: every webhook replica picks addresses and
// needs its own fresh view.
func (v *Inventory) NeedLeaderElection() bool { return false }

// Asks are the releases brought forward for requests in full pools.
func (v *Inventory) Asks() *Asks { return &v.asks }
