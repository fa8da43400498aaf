package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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
	yield  *yielder
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
	a.yield = &yielder{a: a}
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
func (a *Allocator) Reserve(ctx context.Context, req Request) (*Reservation, error) {
	p := req.Pool
	if req.Address.IsValid() && !p.Contains(req.Address) {
		// Asked for by name: an address the operator has since excluded is
		// refused even to the Service that had it.
		return nil, refuse(ReasonAddressOutsidePool, "address %s is not in pool %q (%s); ask for an address inside it or for another pool", req.Address, p.Name, describeRanges(p))
	}
	// The Service's own reservation comes before pool policy: a drained
	// pool keeps its Services' reservations, it refuses new bookings only.
	known, sticky, err := a.sticky(ctx, req)
	if err != nil {
		return nil, err
	}
	share := a.Config().ShareOf(p)
	sticky, held, err := a.yield.lostBooking(ctx, req, share, sticky)
	if err != nil {
		return nil, err
	}
	if sticky != nil {
		res, err := a.takeBack(ctx, req.Pool, req.Service, sticky, req.DryRun)
		if err != errGone {
			return res, err
		}
		// Released between the re-read and the write: a fresh one.
	}
	switch {
	case p.Disabled:
		return nil, refuse(ReasonPoolDisabled, "pool %q is disabled (draining): it keeps its reservations but takes no new ones; ask for another pool", p.Name)
	case !req.Address.IsValid() && !p.AutoAssigns():
		return nil, refuse(ReasonAddressRequired, "pool %q hands out only explicitly requested addresses (autoAssign: false); set scw-lb-ipam.io/address to an address in %s", p.Name, describeRanges(p))
	}
	if share > 0 {
		if held == nil {
			if held, err = a.yield.holdings(ctx, req); err != nil {
				return nil, err
			}
		}
		if err := a.yield.share(ctx, req, share, held); err != nil {
			return nil, err
		}
	}
	res, err := a.bookNew(ctx, req, known)
	for relist := true; ReasonOf(err) == ReasonPoolExhausted; relist = false {
		// A listing that shows room again (a release the view had not
		// seen) is worth one more try, once.
		if err = a.yield.full(ctx, req, err, relist); err != errBookAgain {
			return nil, err
		}
		res, err = a.bookNew(ctx, req, known)
	}
	if err == nil && share > 0 && !req.DryRun {
		if err := a.yield.confirm(ctx, req, share, res); err != nil {
			return nil, err
		}
	}
	return res, err
}

// bookNew books a fresh reservation for req (or predicts one, in a dry
// run).
func (a *Allocator) bookNew(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	switch {
	case req.DryRun:
		return a.predict(ctx, req)
	case req.Address.IsValid():
		return a.bookAddress(ctx, req, known)
	case req.Pool.PicksAddresses():
		return a.bookPicked(ctx, req, known)
	}
	return a.bookAny(ctx, req, known)
}

// predict answers a dry run: what would be booked, from what is known,
// without writing anything.
func (a *Allocator) predict(ctx context.Context, req Request) (*Reservation, error) {
	res := &Reservation{Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID, Address: req.Address}
	if req.Address.IsValid() || !req.Pool.PicksAddresses() {
		if h, ok := a.inv.holder(ctx, req.Pool, req.Address, false); ok {
			return nil, taken(req, h)
		}
		return res, nil
	}
	addr, _, err := a.inv.pick(ctx, req.Pool, true)
	if err != nil {
		return nil, err
	}
	res.Address = addr
	return res, nil
}

// bookAddress books the one address asked for.
func (a *Allocator) bookAddress(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	ip, adopted, err := a.book(ctx, req, req.Address, known)
	if err == nil {
		a.inv.record(req.Pool, ip)
		return booked(req, ip, adopted), nil
	}
	if scaleway.Classify(err) == scaleway.KindAddressTaken {
		h, _ := a.inv.holder(ctx, req.Pool, req.Address, true)
		return nil, taken(req, h)
	}
	return nil, bookError(req, err)
}

// bookPicked picks free addresses from the pool's ranges until a booking
// succeeds. A conflict means the inventory's view was stale: picking goes
// on elsewhere in the pool, and every few conflicts the subnet is listed
// again.
func (a *Allocator) bookPicked(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	for attempt := 1; attempt <= MaxPickAttempts; attempt++ {
		addr, settle, err := a.inv.pick(ctx, req.Pool, false)
		if err != nil {
			return nil, err
		}
		ip, adopted, err := a.book(ctx, req, addr, known)
		switch {
		case err == nil:
			settle(pickBooked, false)
			a.inv.record(req.Pool, ip)
			return booked(req, ip, adopted), nil
		case scaleway.Classify(err) != scaleway.KindAddressTaken:
			settle(pickFailed, false)
			return nil, bookError(req, err)
		}
		// Taken by someone picking in the same order (another replica).
		settle(pickTaken, attempt%3 == 0)
	}
	return nil, refuse(ReasonUnavailable, "pool %q: %d picked addresses were taken by others in a row; the pool is under heavy contention, apply again", req.Pool.Name, MaxPickAttempts)
}

// bookAny lets IPAM choose in the pool's subnet.
func (a *Allocator) bookAny(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	ip, adopted, err := a.book(ctx, req, netip.Addr{}, known)
	if err != nil {
		if scaleway.Classify(err) == scaleway.KindExhausted {
			total := req.Pool.Total()
			return nil, exhausted(req.Pool, total, total)
		}
		return nil, bookError(req, err)
	}
	a.inv.record(req.Pool, ip)
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
func (a *Allocator) book(ctx context.Context, req Request, addr netip.Addr, known map[string]bool) (ip *scaleway.IP, adopted bool, err error) {
	cfg := a.Config()
	tags := Entry{Cluster: cfg.ClusterName, Pool: req.Pool.Name, Service: req.Service}.Tags()
	bookReq := scaleway.BookRequest{PrivateNetworkID: req.Pool.PrivateNetworkID, IPv6: req.Pool.IPFamily == IPv6, Address: addr, Tags: tags}
	ip, err = a.cloud.BookIP(ctx, bookReq)
	if err == nil || scaleway.Classify(err) != scaleway.KindUnavailable || ctx.Err() != nil {
		return ip, false, err
	}
	ips, lerr := serviceIPs(ctx, a.cloud, req)
	if lerr != nil {
		return nil, false, err
	}
	for _, got := range slices.Backward(ips) { // oldest first: the newest is last
		if !known[got.ID] && SameTags(got.Tags, tags) && (!addr.IsValid() || got.Address == addr) {
			return got, true, nil
		}
	}
	// Not booked: one more try.
	ip, err = a.cloud.BookIP(ctx, bookReq)
	return ip, false, err
}

func bookError(req Request, err error) error {
	if scaleway.Classify(err) == scaleway.KindExhausted {
		total := req.Pool.Total()
		return exhausted(req.Pool, total, total)
	}
	return apiError(fmt.Sprintf("booking an address in pool %q for Service %s", req.Pool.Name, req.Service), err)
}

func reservation(req Request, ip *scaleway.IP) *Reservation {
	return &Reservation{ID: ip.ID, Address: ip.Address, Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID}
}

// booked is the reservation of a booking of this admission; an adopted one
// (see book) is not Booked: the admission does not release it on failure.
func booked(req Request, ip *scaleway.IP, adopted bool) *Reservation {
	r := reservation(req, ip)
	r.Booked = !adopted
	return r
}

func taken(req Request, h Holder) *Error {
	return refuse(ReasonAddressTaken, "address %s of pool %q is held by %s; ask for another address, or omit scw-lb-ipam.io/address to get a free one", req.Address, req.Pool.Name, h)
}

func exhausted(p *Pool, used, total uint64) *Error {
	return refuse(ReasonPoolExhausted, "pool %q is exhausted (%d/%d used); ask for another pool, or free addresses in it (scw-lb-ipam status shows who holds them)", p.Name, used, total)
}

func describeRanges(p *Pool) string {
	if len(p.Ranges) == 0 {
		s := p.Prefix().String()
		if len(p.Exclude) > 0 {
			s += " except " + strings.Join(p.Exclude, ", ")
		}
		return s
	}
	s := strings.Join(p.Ranges, ", ")
	if len(p.Exclude) > 0 {
		s += " except " + strings.Join(p.Exclude, ", ")
	}
	return s
}
