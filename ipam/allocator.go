package ipam

import (
	"context"
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
	// Inventory is what the replica knows of the pools, shared with the
	// manager that runs its background refresh (Inventory.Start). When
	// nil, the Allocator builds its own from Cloud, Config, Retention,
	// Clock, OccupancyTTL, RefreshInterval, Rand and Log (a single
	// process: the status command, tests).
	Inventory  *Inventory
	Cloud      scaleway.Cloud
	References References
	Claims     Claims
	// Retention is the release protocol shared with the sweeper: which
	// retained reservations an admission may still take back.
	Retention Retention
	// Clock reads the time the decisions are made at (and paces the
	// refresh of the Inventory built when Inventory is nil).
	Clock clock.WithTicker
	Log   logr.Logger

	// For the Inventory built when Inventory is nil; see InventoryOptions.
	Config          *Config
	OccupancyTTL    time.Duration
	RefreshInterval time.Duration
	Rand            func(n uint64) uint64
}

// Allocator decides which IP a request gets: it takes back a Service's
// retained reservation, books a fresh one or validates a brought one, from
// what its Inventory knows and what Scaleway answers. It holds no state of
// its own beyond its Inventory, and no lock: it is safe for concurrent
// use, and concurrent picks in one pool never choose the same address.
type Allocator struct {
	inv    *Inventory
	cloud  scaleway.Cloud
	refs   References
	claims Claims
	policy Retention
	clock  clock.Clock
	log    logr.Logger
}

// NewAllocator returns an Allocator over its Inventory.
func NewAllocator(o AllocatorOptions) *Allocator {
	a := &Allocator{inv: o.Inventory, cloud: o.Cloud, refs: o.References, claims: o.Claims, policy: o.Retention, clock: o.Clock, log: o.Log}
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
	if a.inv == nil {
		a.inv = NewInventory(InventoryOptions{Cloud: o.Cloud, Config: o.Config, Retention: o.Retention, Clock: o.Clock,
			OccupancyTTL: o.OccupancyTTL, RefreshInterval: o.RefreshInterval, Rand: o.Rand, Log: o.Log})
	}
	return a
}

// Inventory is what the Allocator decides from.
func (a *Allocator) Inventory() *Inventory { return a.inv }

// Config is the configuration in use.
func (a *Allocator) Config() *Config { return a.inv.Config() }

// Remember records the IDs the Service cache shows on a Service (see
// Inventory.Remember): the webhook's informer reaches the Inventory
// through the Allocator it admits with.
func (a *Allocator) Remember(svc types.NamespacedName, ids []string) { a.inv.Remember(svc, ids) }

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
	a.inv.forget(r.ID, r.Address)
	return nil
}
