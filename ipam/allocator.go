package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
)

// MaxPickAttempts bounds bookings per reservation when picked addresses turn
// out to be taken by someone the occupancy view did not know about yet.
const MaxPickAttempts = 8

// References answers "which live Services reference this IPAM ID?" from an
// informer cache of Services.
type References interface {
	ReferencedBy(id string) []types.NamespacedName
}

// NoReferences is References for callers without a Service cache.
type NoReferences struct{}

func (NoReferences) ReferencedBy(string) []types.NamespacedName { return nil }

// AllocatorOptions configures NewAllocator.
type AllocatorOptions struct {
	Cloud      Cloud
	Config     *Config // validated and resolved
	References References
	Clock      clock.PassiveClock
	// OccupancyTTL is how long a listing of a subnet's booked addresses is
	// trusted before the next pick lists it again. Conflicts refresh sooner.
	OccupancyTTL time.Duration
	Log          logr.Logger
}

// Allocator turns requests into IPAM reservations. It is safe for
// concurrent use; concurrent picks in one pool never choose the same address.
type Allocator struct {
	cloud Cloud
	refs  References
	clock clock.PassiveClock
	ttl   time.Duration
	log   logr.Logger
	cfg   atomic.Pointer[Config]

	mu  sync.Mutex
	occ map[string]*occupancy // by subnet ID
}

// NewAllocator returns an Allocator over a resolved Config.
func NewAllocator(o AllocatorOptions) *Allocator {
	a := &Allocator{cloud: o.Cloud, refs: o.References, clock: o.Clock, ttl: o.OccupancyTTL, occ: map[string]*occupancy{}, log: o.Log}
	if a.refs == nil {
		a.refs = NoReferences{}
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.ttl == 0 {
		a.ttl = 5 * time.Minute
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

// Reserve returns an IP for req: the Service's retained IP when there is one
// (sticky), else a fresh booking of the requested address, of an address
// picked from the pool's ranges, or of one IPAM chooses. Scaleway calls:
// one ListIPs (the sticky lookup) and one BookIP, or one UpdateIP instead
// of the booking when a retained IP is reused; pools that pick addresses
// list their subnet when the occupancy view is older than OccupancyTTL.
func (a *Allocator) Reserve(ctx context.Context, req Request) (*Reservation, error) {
	p := req.Pool
	switch {
	case p.Disabled:
		return nil, refuse(ReasonPoolDisabled, "pool %q is disabled (draining): it keeps its reservations but takes no new ones; ask for another pool", p.Name)
	case req.Address.IsValid() && !p.Contains(req.Address):
		return nil, refuse(ReasonAddressOutsidePool, "address %s is not in pool %q (%s); ask for an address inside it or for another pool", req.Address, p.Name, describeRanges(p))
	case !req.Address.IsValid() && !p.AutoAssigns():
		return nil, refuse(ReasonAddressRequired, "pool %q hands out only explicitly requested addresses (autoAssign: false); set scw-lb-ipam.io/address to an address in %s", p.Name, describeRanges(p))
	}

	known, sticky, err := a.sticky(ctx, req)
	if err != nil {
		return nil, err
	}
	if sticky != nil {
		return a.reuse(ctx, req, sticky)
	}
	if req.DryRun {
		return a.predict(ctx, req)
	}
	switch {
	case req.Address.IsValid():
		return a.bookAddress(ctx, req, known)
	case p.PicksAddresses():
		return a.bookPicked(ctx, req, known)
	default:
		return a.bookAny(ctx, req, known)
	}
}

// sticky finds a retained reservation of the same Service and pool. It also
// returns the IDs of every reservation it saw, so that a booking whose answer
// was lost can be told apart from them later.
func (a *Allocator) sticky(ctx context.Context, req Request) (known map[string]bool, found *IP, err error) {
	cfg := a.Config()
	ips, err := a.serviceIPs(ctx, req)
	if err != nil {
		return nil, nil, apiError(fmt.Sprintf("looking up earlier reservations of Service %s", req.Service), err)
	}
	known = map[string]bool{}
	for _, ip := range ips {
		known[ip.ID] = true
		if !a.reusable(cfg, req, ip) {
			continue
		}
		// Prefer a reservation that is not orphaned: it is the answer to an
		// earlier attempt of this very admission (a client retry).
		if found == nil || (orphaned(found) && !orphaned(ip)) {
			found = ip
		}
	}
	return known, found, nil
}

// serviceIPs lists the IPs tagged for the request's Service on the pool's
// network and family (any cluster, any pool: the caller filters).
func (a *Allocator) serviceIPs(ctx context.Context, req Request) ([]*IP, error) {
	v6 := req.Pool.IPFamily == IPv6
	return a.cloud.ListIPs(ctx, ListFilter{PrivateNetworkID: req.Pool.PrivateNetworkID, Tags: []string{ServiceTag(req.Service)}, IPv6: &v6})
}

func orphaned(ip *IP) bool {
	e, _ := ParseEntry(ip.Tags)
	return !e.OrphanedSince.IsZero()
}

// reusable: ours, same pool and Service, attached to nothing, referenced by
// no live Service, and the requested address if one was asked for.
func (a *Allocator) reusable(cfg *Config, req Request, ip *IP) bool {
	e, ok := ParseEntry(ip.Tags)
	if !ok || !e.Owns(cfg.ClusterName) || e.Pool != req.Pool.Name || e.Service != req.Service {
		return false
	}
	if ip.Resource != nil || (req.Address.IsValid() && ip.Address != req.Address) {
		return false
	}
	return len(a.refs.ReferencedBy(ip.ID)) == 0
}

// reuse takes a retained IP back. Clearing orphaned-since in the same
// admission is what keeps the sweeper from releasing it afterwards.
func (a *Allocator) reuse(ctx context.Context, req Request, ip *IP) (*Reservation, error) {
	res := a.reservation(req, ip)
	res.Reused = true
	if req.DryRun {
		return res, nil
	}
	e, _ := ParseEntry(ip.Tags)
	if !e.OrphanedSince.IsZero() {
		e.OrphanedSince = time.Time{}
		if _, err := a.cloud.SetTags(ctx, ip.ID, e.Tags()); err != nil {
			return nil, apiError(fmt.Sprintf("taking back address %s retained for Service %s", ip.Address, req.Service), err)
		}
	}
	a.markUsed(req.Pool, ip)
	return res, nil
}

// predict answers a dry run: what would be booked, from what is known,
// without writing anything.
func (a *Allocator) predict(ctx context.Context, req Request) (*Reservation, error) {
	res := &Reservation{Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID, Address: req.Address}
	if req.Address.IsValid() || !req.Pool.PicksAddresses() {
		if h, ok := a.knownHolder(req.Pool, req.Address); ok {
			return nil, taken(req, h)
		}
		return res, nil
	}
	o, err := a.occupancy(ctx, req.Pool)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s, err := o.space(req.Pool)
	if err != nil {
		return nil, err
	}
	addr, err := s.Pick()
	if err != nil {
		return nil, exhausted(req.Pool, s.Used(), s.Size())
	}
	res.Address = addr
	return res, nil
}

// bookAddress books the one address asked for.
func (a *Allocator) bookAddress(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	ip, err := a.book(ctx, req, req.Address, known)
	if err == nil {
		a.markUsed(req.Pool, ip)
		return a.booked(req, ip), nil
	}
	if Classify(err) == KindAddressTaken {
		return nil, taken(req, a.findHolder(ctx, req.Pool, req.Address))
	}
	return nil, a.bookError(req, err)
}

// bookPicked picks free addresses from the pool's ranges until a booking
// succeeds. An address is marked used before the call, so concurrent
// admissions pick different ones; a conflict means the view was stale, and
// every few conflicts the subnet is listed again.
func (a *Allocator) bookPicked(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	for attempt := 1; attempt <= MaxPickAttempts; attempt++ {
		o, err := a.occupancy(ctx, req.Pool)
		if err != nil {
			return nil, err
		}
		o.mu.Lock()
		s, err := o.space(req.Pool)
		if err != nil {
			o.mu.Unlock()
			return nil, err
		}
		addr, perr := s.Pick()
		used, size := s.Used(), s.Size()
		if perr == nil {
			o.take(addr, Holder{})
		}
		o.mu.Unlock()
		if perr != nil {
			return nil, exhausted(req.Pool, used, size)
		}

		ip, err := a.book(ctx, req, addr, known)
		if err == nil {
			a.markUsed(req.Pool, ip)
			return a.booked(req, ip), nil
		}
		if Classify(err) != KindAddressTaken {
			o.mu.Lock()
			o.free(addr)
			o.mu.Unlock()
			return nil, a.bookError(req, err)
		}
		if attempt%3 == 0 {
			a.invalidate(req.Pool)
		}
	}
	return nil, refuse(ReasonUnavailable, "pool %q: %d picked addresses were taken by others in a row; the pool is under heavy contention, apply again", req.Pool.Name, MaxPickAttempts)
}

// bookAny lets IPAM choose in the pool's subnet.
func (a *Allocator) bookAny(ctx context.Context, req Request, known map[string]bool) (*Reservation, error) {
	ip, err := a.book(ctx, req, netip.Addr{}, known)
	if err != nil {
		if Classify(err) == KindExhausted {
			total := req.Pool.Total()
			return nil, exhausted(req.Pool, total, total)
		}
		return nil, a.bookError(req, err)
	}
	a.markUsed(req.Pool, ip)
	return a.booked(req, ip), nil
}

// book sends one BookIP with the ledger tags. When the answer is lost (a
// server error or a dropped connection after the request went out), the
// booking may have happened: the Service's reservations are listed again and
// one that was not there before is adopted instead of booking twice.
func (a *Allocator) book(ctx context.Context, req Request, addr netip.Addr, known map[string]bool) (*IP, error) {
	cfg := a.Config()
	tags := Entry{Cluster: cfg.ClusterName, Pool: req.Pool.Name, Service: req.Service}.Tags()
	bookReq := BookRequest{PrivateNetworkID: req.Pool.PrivateNetworkID, IPv6: req.Pool.IPFamily == IPv6, Address: addr, Tags: tags}
	ip, err := a.cloud.BookIP(ctx, bookReq)
	if err == nil || Classify(err) != KindUnavailable || ctx.Err() != nil {
		return ip, err
	}
	ips, lerr := a.serviceIPs(ctx, req)
	if lerr != nil {
		return nil, err
	}
	for _, got := range ips {
		if !known[got.ID] && SameTags(got.Tags, tags) && (!addr.IsValid() || got.Address == addr) {
			return got, nil
		}
	}
	// Not booked: one more try.
	return a.cloud.BookIP(ctx, bookReq)
}

func (a *Allocator) bookError(req Request, err error) error {
	if Classify(err) == KindExhausted {
		total := req.Pool.Total()
		return exhausted(req.Pool, total, total)
	}
	return apiError(fmt.Sprintf("booking an address in pool %q for Service %s", req.Pool.Name, req.Service), err)
}

func (a *Allocator) reservation(req Request, ip *IP) *Reservation {
	return &Reservation{ID: ip.ID, Address: ip.Address, Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID}
}

func (a *Allocator) booked(req Request, ip *IP) *Reservation {
	r := a.reservation(req, ip)
	r.Booked = true
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

// Release gives back an IP this call booked, when the admission that wanted
// it failed further on. Errors are returned for logging: the sweeper
// reclaims whatever is left after its grace period.
func (a *Allocator) Release(ctx context.Context, r *Reservation) error {
	if r == nil || !r.Booked {
		return nil
	}
	if err := a.cloud.ReleaseIP(ctx, r.ID); err != nil && Classify(err) != KindNotFound {
		return err
	}
	a.mu.Lock()
	for _, o := range a.occ {
		o.mu.Lock()
		o.free(r.Address)
		o.mu.Unlock()
	}
	a.mu.Unlock()
	return nil
}

// ValidateID checks a bring-your-own IPAM ID for svc: it must exist in the
// region, sit on the Private Network of a pool namespace may use, be attached
// to nothing, and be neither referenced by another live Service nor tagged to
// another Service. One GetIP, nothing written.
func (a *Allocator) ValidateID(ctx context.Context, id string, svc types.NamespacedName) (*Reservation, error) {
	cfg := a.Config()
	ip, err := a.cloud.GetIP(ctx, id)
	if err != nil {
		if Classify(err) == KindNotFound {
			return nil, refuse(ReasonIDNotFound, "IPAM IP %s does not exist in region %s; check the ID (scw ipam ip get %s)", id, cfg.Region, id)
		}
		return nil, apiError("reading IPAM IP "+id, err)
	}
	if ip.Region != "" && ip.Region != cfg.Region {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s is in region %s, not %s where this cluster's Load Balancers live", id, ip.Region, cfg.Region)
	}
	var pool *Pool
	var allowed []string
	for _, p := range cfg.AllowedPools(svc.Namespace) {
		allowed = append(allowed, p.Name)
		if pool == nil && p.SubnetID() == ip.SubnetID {
			pool = p
		}
	}
	if pool == nil {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is not on the Private Network of a pool namespace %s may use (%s); reserve it on one of those Private Networks", id, ip.Address, svc.Namespace, listOrNone(allowed))
	}
	if ip.Resource != nil {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is attached to %s; use an unattached IP", id, ip.Address, ip.Resource)
	}
	for _, other := range a.refs.ReferencedBy(id) {
		if other != svc {
			return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is already used by Service %s; an IP serves one Service", id, ip.Address, other)
		}
	}
	if e, ok := ParseEntry(ip.Tags); ok && (e.Service != svc || !e.Owns(cfg.ClusterName)) {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is reserved for Service %s of cluster %s; use an IP reserved for this Service", id, ip.Address, e.Service, e.Cluster)
	}
	r := &Reservation{ID: ip.ID, Address: ip.Address, Pool: pool.Name, PrivateNetworkID: pool.PrivateNetworkID, BringYourOwn: true}
	if e, ok := ParseEntry(ip.Tags); ok && e.Owns(cfg.ClusterName) {
		r.BringYourOwn = false // one of ours, e.g. copied from an earlier annotation
	}
	return r, nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// occupancy is what the allocator knows of one subnet's booked addresses,
// from a listing plus its own bookings since.
type occupancy struct {
	mu      sync.Mutex
	subnet  string
	loaded  time.Time
	holders map[netip.Addr]Holder
	spaces  map[string]*addrspace.Space // by pool name
}

func (o *occupancy) space(p *Pool) (*addrspace.Space, error) {
	if s, ok := o.spaces[p.Name]; ok {
		return s, nil
	}
	s, err := p.NewSpace()
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", p.Name, err)
	}
	for addr := range o.holders {
		s.Mark(addr)
	}
	o.spaces[p.Name] = s
	return s, nil
}

func (o *occupancy) take(addr netip.Addr, h Holder) {
	o.holders[addr] = h
	for _, s := range o.spaces {
		s.Mark(addr)
	}
}

func (o *occupancy) free(addr netip.Addr) {
	delete(o.holders, addr)
	for _, s := range o.spaces {
		s.Unmark(addr)
	}
}

// occupancy returns the pool's subnet view, listing the subnet when the view
// is missing or older than the TTL.
func (a *Allocator) occupancy(ctx context.Context, p *Pool) (*occupancy, error) {
	a.mu.Lock()
	o, ok := a.occ[p.SubnetID()]
	if !ok {
		o = &occupancy{subnet: p.SubnetID(), holders: map[netip.Addr]Holder{}, spaces: map[string]*addrspace.Space{}}
		a.occ[p.SubnetID()] = o
	}
	a.mu.Unlock()

	o.mu.Lock()
	fresh := !o.loaded.IsZero() && a.clock.Since(o.loaded) < a.ttl
	o.mu.Unlock()
	if fresh {
		return o, nil
	}
	v6 := p.IPFamily == IPv6
	ips, err := a.cloud.ListIPs(ctx, ListFilter{PrivateNetworkID: p.PrivateNetworkID, IPv6: &v6})
	if err != nil {
		return nil, apiError(fmt.Sprintf("listing the addresses of pool %q", p.Name), err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Keep addresses marked by bookings in flight: they may not be listed yet.
	inflight := map[netip.Addr]Holder{}
	for addr, h := range o.holders {
		if h.IPID == "" {
			inflight[addr] = h
		}
	}
	o.holders = inflight
	for _, ip := range ips {
		if ip.SubnetID == p.SubnetID() {
			o.holders[ip.Address] = holderOf(ip)
		}
	}
	for _, s := range o.spaces {
		s.Reset()
		for addr := range o.holders {
			s.Mark(addr)
		}
	}
	o.loaded = a.clock.Now()
	return o, nil
}

// Start keeps the occupancy views of the pools fresh in the background, so
// admissions rarely pay for a subnet listing and Stats stays current. It lists them
// once right away and then every half TTL until ctx ends; a failed listing
// waits for the next tick (an admission lists by itself when its view is
// stale). It implements controller-runtime's manager.Runnable.
func (a *Allocator) Start(ctx context.Context) error {
	tick := time.NewTicker(a.ttl / 2)
	defer tick.Stop()
	for {
		if err := a.Refresh(ctx); err != nil && ctx.Err() == nil {
			a.log.Error(err, "refreshing the pools' occupancy")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// existing returns the subnet view of pool p, nil before its first listing.
func (a *Allocator) existing(p *Pool) *occupancy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.occ[p.SubnetID()]
}

// invalidate drops a subnet's view so that the next pick lists it again.
func (a *Allocator) invalidate(p *Pool) {
	if o := a.existing(p); o != nil {
		o.mu.Lock()
		o.loaded = time.Time{}
		o.mu.Unlock()
	}
}

// markUsed records a booking of ours in the subnet's view, if there is one.
func (a *Allocator) markUsed(p *Pool, ip *IP) {
	o := a.existing(p)
	if o == nil {
		return
	}
	o.mu.Lock()
	o.take(ip.Address, holderOf(ip))
	o.mu.Unlock()
}

// knownHolder looks an address up in the subnet's view without any call.
func (a *Allocator) knownHolder(p *Pool, addr netip.Addr) (Holder, bool) {
	o := a.existing(p)
	if o == nil || !addr.IsValid() {
		return Holder{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.holders[addr]
	return h, ok && h.IPID != ""
}

// findHolder names who holds addr after a conflict, listing the subnet when
// the view does not know.
func (a *Allocator) findHolder(ctx context.Context, p *Pool, addr netip.Addr) Holder {
	if h, ok := a.knownHolder(p, addr); ok {
		return h
	}
	a.invalidate(p)
	if _, err := a.occupancy(ctx, p); err == nil {
		if h, ok := a.knownHolder(p, addr); ok {
			return h
		}
	}
	return Holder{}
}

// NeedLeaderElection is false: every webhook replica picks addresses and
// needs its own fresh view.
func (a *Allocator) NeedLeaderElection() bool { return false }
