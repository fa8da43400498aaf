package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
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

// AllocatorOptions configures NewAllocator.
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

	// For the Inventory built when Inventory is nil; see InventoryOptions.
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

// NewAllocator returns an Allocator over its Inventory.
func New(o Options) *Allocator {
	a := &Allocator{deps: &deps{inv: o.Inventory, cloud: o.Cloud, refs: o.References, claims: o.Claims, policy: o.Retention, clock: o.Clock, log: o.Log}}
	if a.refs == nil {
		a.refs = NoReferences{}
	}
	if a.claims == nil {
		a.claims = NoClaims{}
	}
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
	return a
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
func (a *Allocator) Release(ctx context.Context, r *ipam.Reservation) error { return a.release(ctx, r) }

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
func (a *Allocator) Reserve(ctx context.Context, req ipam.Request) (*ipam.Reservation, error) {
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
		res, err := a.taker.takeBack(ctx, req.Pool, req.Service, req.ShareNamespace(), sticky, req.DryRun)
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

// sticky finds the reservation of the same Service and pool to take back.
// Among the candidates it prefers the one a live Service actually used (its
// uid was back-filled, or, before the back-fill, the Service cache showed
// it on a Service of that name) over pending ones (bookings of failed or
// retried admissions), and the oldest booking first: a re-created Service
// gets the address its previous incarnation had, not one booked by a retry
// in between. When that reservation is still attached to the previous Load
// Balancer, the answer is a retryable refusal: booking another would move
// the Service to a new address once the old LB is gone.
//
// The candidates come from the reservation index, without a call when it
// holds none: a fresh Service costs its booking alone. Each candidate is
// re-read (GetIP) before it is handed out, and taken back under the
// release protocol: a stale index costs stickiness, never correctness.
// Without a fresh index (before the first listing, or after listings
// failed for longer than the TTL) the Service's reservations are listed.
//
// It also returns the IDs of every reservation of the Service it knows of,
// so that a booking whose answer was lost can be told apart from them.
func (t *taker) sticky(ctx context.Context, req ipam.Request) (known map[string]bool, found *scaleway.IP, err error) {
	ids, known, fresh := t.inv.Candidates(req)
	var ips []*scaleway.IP
	// The index holds this cluster's reservations only: a pool that adopts
	// other clusters' lists the Service's, whichever cluster tagged them.
	if fresh && len(req.Pool.AdoptFrom) == 0 {
		ips, err = t.reread(ctx, req.Service, ids)
	} else {
		ips, known, err = listService(ctx, t.cloud, req)
	}
	if err != nil || len(ips) == 0 {
		return known, nil, err
	}
	found, err = t.choose(ctx, req, ips)
	return known, found, err
}

// bookNew books a fresh reservation for req (or predicts one, in a dry
// run).
func (b *booker) bookNew(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Reservation, error) {
	switch {
	case req.DryRun:
		return b.predict(ctx, req)
	case req.Address.IsValid():
		return b.bookAddress(ctx, req, known)
	case req.Pool.PicksAddresses():
		return b.bookPicked(ctx, req, known)
	}
	return b.bookAny(ctx, req, known)
}

// predict answers a dry run: what would be booked, from what is known,
// without writing anything.
func (b *booker) predict(ctx context.Context, req ipam.Request) (*ipam.Reservation, error) {
	res := &ipam.Reservation{Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID, Address: req.Address}
	if req.Address.IsValid() || !req.Pool.PicksAddresses() {
		if h, ok := b.inv.WhoHolds(ctx, req.Pool, req.Address, false); ok {
			return nil, ipam.Taken(req.Address, req.Pool, h)
		}
		return res, nil
	}
	addr, _, err := b.pick(ctx, req.Pool, true)
	if err != nil {
		return nil, err
	}
	res.Address = addr
	return res, nil
}

// bookAddress books the one address asked for.
func (b *booker) bookAddress(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Reservation, error) {
	ip, adopted, err := b.book(ctx, req, req.Address, known)
	if err == nil {
		b.inv.Record(req.Pool, ip)
		return booked(req, ip, adopted), nil
	}
	if scaleway.Classify(err) == scaleway.KindAddressTaken {
		h, _ := b.inv.WhoHolds(ctx, req.Pool, req.Address, true)
		return nil, ipam.Taken(req.Address, req.Pool, h)
	}
	return nil, bookError(req, err)
}

// bookPicked picks free addresses from the pool's ranges until a booking
// succeeds. A conflict means the inventory's view was stale: picking goes
// on elsewhere in the pool, and every few conflicts the subnet is listed
// again.
func (b *booker) bookPicked(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Reservation, error) {
	for attempt := 1; attempt <= MaxPickAttempts; attempt++ {
		addr, settle, err := b.pick(ctx, req.Pool, false)
		if err != nil {
			return nil, err
		}
		ip, adopted, err := b.book(ctx, req, addr, known)
		switch {
		case err == nil:
			settle(inventory.PickBooked, false)
			b.inv.Record(req.Pool, ip)
			return booked(req, ip, adopted), nil
		case scaleway.Classify(err) != scaleway.KindAddressTaken:
			settle(inventory.PickFailed, false)
			return nil, bookError(req, err)
		}
		// Taken by someone picking in the same order (another replica).
		settle(inventory.PickTaken, attempt%3 == 0)
	}
	return nil, ipam.Contended(req.Pool, MaxPickAttempts)
}

// bookAny lets IPAM choose in the pool's subnet.
func (b *booker) bookAny(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Reservation, error) {
	ip, adopted, err := b.book(ctx, req, netip.Addr{}, known)
	if err != nil {
		if scaleway.Classify(err) == scaleway.KindExhausted {
			total := req.Pool.Total()
			return nil, ipam.Exhausted(req.Pool, total, total)
		}
		return nil, bookError(req, err)
	}
	b.inv.Record(req.Pool, ip)
	return booked(req, ip, adopted), nil
}

// book sends one BookIP with the ledger tags. When the answer is lost (a
// server error or a dropped connection after the request went out), the
// booking may have happened: the Service's reservations are listed again and
// one that was not there before is adopted instead of booking twice. The
// newest such one is taken, and reported adopted: it is most likely this
// booking, but it may be another admission's of the same Service (a retry
// on the other replica, which the index had not seen), so it is never
// released by this admission; the sweeper reclaims it if no Service takes
// it.
func (b *booker) book(ctx context.Context, req ipam.Request, addr netip.Addr, known map[string]bool) (ip *scaleway.IP, adopted bool, err error) {
	cfg := b.inv.Config()
	tags := ipam.Entry{Cluster: cfg.ClusterName, Pool: req.Pool.Name, Service: req.Service, Namespace: req.ShareNamespace()}.Tags()
	bookReq := scaleway.BookRequest{PrivateNetworkID: req.Pool.PrivateNetworkID, IPv6: req.Pool.IPFamily == ipam.IPv6, Address: addr, Tags: tags}
	ip, err = b.cloud.BookIP(ctx, bookReq)
	if err == nil || scaleway.Classify(err) != scaleway.KindUnavailable || ctx.Err() != nil {
		return ip, false, err
	}
	ips, lerr := serviceIPs(ctx, b.cloud, req)
	if lerr != nil {
		return nil, false, err
	}
	for _, got := range slices.Backward(ips) { // oldest first: the newest is last
		if !known[got.ID] && ipam.SameTags(got.Tags, tags) && (!addr.IsValid() || got.Address == addr) {
			return got, true, nil
		}
	}
	// Not booked: one more try.
	ip, err = b.cloud.BookIP(ctx, bookReq)
	return ip, false, err
}

func bookError(req ipam.Request, err error) error {
	if scaleway.Classify(err) == scaleway.KindExhausted {
		total := req.Pool.Total()
		return ipam.Exhausted(req.Pool, total, total)
	}
	return ipam.APIError(fmt.Sprintf("booking an address in pool %q for Service %s", req.Pool.Name, req.Service), err)
}

func reservation(req ipam.Request, ip *scaleway.IP) *ipam.Reservation {
	return &ipam.Reservation{ID: ip.ID, Address: ip.Address, Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID}
}

// booked is the reservation of a booking of this admission; an adopted one
// (see book) is not Booked: the admission does not release it on failure.
func booked(req ipam.Request, ip *scaleway.IP, adopted bool) *ipam.Reservation {
	r := reservation(req, ip)
	r.Booked = !adopted
	return r
}

// pick chooses a free address in p's ranges (inventory.Pick), wording what
// stops it for the user.
func (b *booker) pick(ctx context.Context, p *ipam.Pool, predict bool) (netip.Addr, func(inventory.Outcome, bool), error) {
	addr, settle, err := b.inv.Pick(ctx, p, predict)
	var full *inventory.NoRoom
	switch {
	case errors.As(err, &full):
		return addr, nil, ipam.Exhausted(p, full.Used, full.Size)
	case err != nil:
		return addr, nil, ipam.APIError(fmt.Sprintf("listing the addresses of pool %q", p.Name), err)
	}
	return addr, settle, nil
}
