package allocator

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// MaxPickAttempts bounds bookings per reservation when picked addresses turn
// out to be taken by someone the occupancy view did not know about yet.
const MaxPickAttempts = 8

// Options configures New.
type Options struct {
	// Inventory is what the replica knows of the pools, shared with the
	// manager that runs its background refresh (Inventory.Start). When
	// nil, the Allocator builds its own from Cloud, Config, Retention,
	// Clock, OccupancyTTL, RefreshInterval, Rand and Log (a single
	// process: the status command, tests).
	Inventory  *inventory.Inventory
	Cloud      scaleway.Cloud
	References References
	Claims     Claims
	// Retention is the release protocol shared with the sweeper: which
	// retained reservations an admission may still take back.
	Retention ipam.Retention
	// Clock reads the time the decisions are made at (and paces the
	// refresh of the Inventory built when Inventory is nil).
	Clock clock.WithTicker
	Log   logr.Logger

	// For the Inventory built when Inventory is nil; see inventory.Options.
	Config          *ipam.Config
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
	*deps
	taker  taker
	room   room
	booker booker
}

// taker finds a Service's own reservation and takes it back (sticky.go,
// takeback.go).
type taker struct{ *deps }

// room keeps namespaces to their share and makes room in full pools
// (share.go, yield.go).
type room struct{ *deps }

// booker books fresh reservations (below).
type booker struct{ *deps }

// New returns an Allocator over its Inventory. It refuses Options without
// References or Claims.
func New(o Options) (*Allocator, error) {
	// A missing Service cache or claim store would silently turn off the
	// "referenced by another Service" and "one Service per brought ID"
	// checks: the caller names the no-op ones when it means them.
	if o.References == nil {
		return nil, errors.New("allocator: Options.References is nil: pass the Service cache (servicecache.Records), or NoReferences{} where no Service can reference an IPAM ID")
	}
	if o.Claims == nil {
		return nil, errors.New("allocator: Options.Claims is nil: pass the claim store (claims.Leases), or NoClaims{} for a single process that trusts its cache alone")
	}
	a := &Allocator{deps: &deps{inv: o.Inventory, cloud: o.Cloud, refs: o.References, claims: o.Claims, policy: o.Retention, clock: o.Clock, log: o.Log}}
	if a.policy.PendingGrace == 0 {
		a.policy.PendingGrace = ipam.DefaultPendingGrace
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.inv == nil {
		a.inv = inventory.New(inventory.Options{Cloud: o.Cloud, Config: o.Config, Retention: o.Retention, Clock: o.Clock,
			OccupancyTTL: o.OccupancyTTL, RefreshInterval: o.RefreshInterval, Rand: o.Rand, Log: o.Log})
	}
	a.taker, a.room, a.booker = taker{a.deps}, room{a.deps}, booker{a.deps}
	return a, nil
}

// Inventory is what the Allocator decides from.
func (a *Allocator) Inventory() *inventory.Inventory { return a.inv }

// Config is the configuration in use.
func (a *Allocator) Config() *ipam.Config { return a.inv.Config() }

// Remember records the IDs the Service cache shows on a Service (see
// Inventory.Remember): the webhook's informer reaches the Inventory
// through the Allocator it admits with.
func (a *Allocator) Remember(svc types.NamespacedName, ids []string) { a.inv.Remember(svc, ids) }

// Release gives back an IP this call booked, when the admission that wanted
// it failed further on. Errors are returned for logging: the sweeper
// reclaims whatever is left after its grace period.
func (a *Allocator) Release(ctx context.Context, r *ipam.Grant) error { return a.release(ctx, r) }

// Reserve returns an IP for req: the Service's retained IP when there is one
// (sticky), else a fresh booking of the requested address, of an address
// picked from the pool's ranges, or of one IPAM chooses. Scaleway calls, in
// steady state (Start keeps the pools listed): one BookIP for a Service the
// reservation index holds nothing for; one GetIP per indexed candidate,
// plus an UpdateIP when a retained IP is taken back. Without a fresh index
// the Service's reservations are listed first (one ListIPs), and pools
// that pick addresses list their subnet when their view is older than
// OccupancyTTL. While the Service's reservation is still attached to its
// previous Load Balancer, nothing is booked and the answer is a retryable
// refusal.
func (a *Allocator) Reserve(ctx context.Context, req ipam.Request) (*ipam.Grant, error) {
	p := req.Pool
	if req.Address.IsValid() && !p.Contains(req.Address) {
		// Asked for by name: an address the operator has since excluded is
		// refused even to the Service that had it.
		return nil, ipam.OutsidePool(req.Address, p)
	}
	// The Service's own reservation comes before pool policy: a drained
	// pool keeps its Services' reservations, it refuses new bookings only.
	known, sticky, err := a.taker.sticky(ctx, req)
	if err != nil {
		return nil, err
	}
	share := a.Config().ShareOf(p)
	sticky, held, err := a.room.lostBooking(ctx, req, share, sticky)
	if err != nil {
		return nil, err
	}
	if sticky != nil {
		res, err := a.taker.takeBack(ctx, req.Pool, req.Service, req.JudgedNamespace(), sticky, req.DryRun)
		if err != errGone {
			return res, err
		}
		// Released between the re-read and the write: a fresh one.
	}
	switch {
	case p.Disabled:
		return nil, ipam.PoolDisabled(p)
	case !req.Address.IsValid() && !p.AutoAssigns():
		return nil, ipam.AddressRequired(p)
	}
	if share > 0 {
		if held == nil {
			if held, err = a.room.holdings(ctx, req); err != nil {
				return nil, err
			}
		}
		if err := a.room.share(ctx, req, share, held); err != nil {
			return nil, err
		}
	}
	res, err := a.booker.bookNew(ctx, req, known)
	for reread := true; ipam.ReasonOf(err) == ipam.ReasonPoolExhausted; reread = false {
		// A re-read that shows room again (a release the view had not
		// seen) is worth one more try, once.
		if err = a.room.full(ctx, req, err, reread); err != errBookAgain {
			return nil, err
		}
		res, err = a.booker.bookNew(ctx, req, known)
	}
	if err == nil && share > 0 && !req.DryRun {
		if err := a.room.confirm(ctx, req, share, res); err != nil {
			return nil, err
		}
	}
	return res, err
}
