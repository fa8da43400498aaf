package ipam

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// MaxPickAttempts bounds bookings per reservation when picked addresses turn
// out to be taken by someone the occupancy view did not know about yet.
const MaxPickAttempts = 8

// References answers "which live Services reference this IPAM ID?" from an
// informer cache of Services. An error (the cache cannot answer within the
// admission's deadline) fails the admission: an unknown answer never lets an
// IP be handed out.
type References interface {
	ReferencedBy(ctx context.Context, id string) ([]types.NamespacedName, error)
	// Exists reports whether a Service of that name exists, live or
	// Terminating: the previous incarnation of a re-created Service.
	Exists(ctx context.Context, svc types.NamespacedName) (bool, error)
}

// NoReferences is References for callers without a Service cache.
type NoReferences struct{}

func (NoReferences) ReferencedBy(context.Context, string) ([]types.NamespacedName, error) {
	return nil, nil
}

func (NoReferences) Exists(context.Context, types.NamespacedName) (bool, error) { return false, nil }

// Claims makes "one Service per bring-your-own IP" hold across replicas: the
// cache that References reads lags, and two replicas may validate the same
// ID at the same moment. Claim succeeds for exactly one Service per ID.
type Claims interface {
	Claim(ctx context.Context, id string, svc types.NamespacedName) error
	// Holder is the Service that claimed the ID, if any: read only.
	Holder(ctx context.Context, id string) (svc types.NamespacedName, ok bool, err error)
}

// NoClaims is Claims for a single process that trusts its cache alone.
type NoClaims struct{}

func (NoClaims) Claim(context.Context, string, types.NamespacedName) error { return nil }

func (NoClaims) Holder(context.Context, string) (types.NamespacedName, bool, error) {
	return types.NamespacedName{}, false, nil
}

// AllocatorOptions configures NewAllocator.
type AllocatorOptions struct {
	Cloud      scaleway.Cloud
	Config     *Config // validated and resolved
	References References
	Claims     Claims
	// Retention is the release protocol shared with the sweeper: which
	// retained reservations an admission may still take back.
	Retention Retention
	// Clock reads the time and paces the background refresh (Start).
	Clock clock.WithTicker
	// OccupancyTTL is how long a listing of a subnet's booked addresses is
	// trusted: past it, a pick lists the subnet again and the sticky lookup
	// lists the Service's reservations instead of reading the index.
	// Conflicts refresh sooner.
	OccupancyTTL time.Duration
	// Rand returns a number in [0, n): where picking goes on in a pool
	// after a conflict. Default math/rand/v2.
	Rand func(n uint64) uint64
	// RefreshInterval paces the background listing (Start) that keeps the
	// occupancy views and reservation indexes fresh; default a fifth of
	// the TTL.
	RefreshInterval time.Duration
	Log             logr.Logger
}

// Allocator turns requests into IPAM reservations. It is safe for
// concurrent use; concurrent picks in one pool never choose the same address.
type Allocator struct {
	cloud   scaleway.Cloud
	refs    References
	claims  Claims
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
	hints map[types.NamespacedName]map[string]time.Time
	// shown are the IDs the Service cache showed on each Service, and when
	// last: unlike hints they outlive re-reads and listings, until a listing
	// shows the uid back-filled or the IP gone. When no uid tells a
	// re-created Service's reservations apart (the sweeper's leader died
	// before back-filling it), the one its previous incarnation showed wins
	// over a pending booking.
	shown map[types.NamespacedName]map[string]time.Time
	// firstListing is closed once Start's first listing of the pools ended.
	firstListing chan struct{}
	firstOnce    sync.Once
	// joined, in tests, is called when a caller waits on a listing in
	// flight instead of starting one.
	joined func()
}

// NewAllocator returns an Allocator over a resolved Config.
func NewAllocator(o AllocatorOptions) *Allocator {
	a := &Allocator{cloud: o.Cloud, refs: o.References, claims: o.Claims, policy: o.Retention, clock: o.Clock, ttl: o.OccupancyTTL, refresh: o.RefreshInterval,
		occ: map[string]*occupancy{}, hints: map[types.NamespacedName]map[string]time.Time{},
		shown: map[types.NamespacedName]map[string]time.Time{}, firstListing: make(chan struct{}), log: o.Log}
	if a.refs == nil {
		a.refs = NoReferences{}
	}
	if a.claims == nil {
		a.claims = NoClaims{}
	}
	if a.policy.PendingGrace == 0 {
		a.policy.PendingGrace = DefaultPendingGrace
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.ttl == 0 {
		a.ttl = 5 * time.Minute
	}
	if a.refresh == 0 {
		a.refresh = a.ttl / 5
	}
	if a.rand = o.Rand; a.rand == nil {
		a.rand = rand.Uint64N
	}
	a.cfg.Store(o.Config)
	return a
}

// Config is the configuration in use.
func (a *Allocator) Config() *Config { return a.cfg.Load() }

// SetConfig swaps in a new validated and resolved configuration. Pick state
// is rebuilt from the next listing, as ranges may have changed.
func (a *Allocator) SetConfig(c *Config) {
	a.cfg.Store(c)
	a.mu.Lock()
	a.occ = map[string]*occupancy{}
	a.mu.Unlock()
}

// Release gives back an IP this call booked, when the admission that wanted
// it failed further on. Errors are returned for logging: the sweeper
// reclaims whatever is left after its grace period.
func (a *Allocator) Release(ctx context.Context, r *Reservation) error {
	if r == nil || !r.Booked {
		return nil
	}
	if err := a.cloud.ReleaseIP(ctx, r.ID); err != nil && scaleway.Classify(err) != scaleway.KindNotFound {
		return err
	}
	a.forget(r.ID, r.Address)
	return nil
}
