package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// occupancy is what the allocator knows of one subnet's booked addresses,
// from a listing plus its own bookings since.
type occupancy struct {
	mu      sync.Mutex
	subnet  string
	loaded  time.Time
	holders map[netip.Addr]Holder
	spaces  map[string]*addrspace.Space // by pool name
	// mine indexes this cluster's reservations on the subnet, from the
	// same listing and writes.
	mine index
	// since is when the listing behind the view started.
	since time.Time
	// inflight counts picked addresses whose booking has not answered yet:
	// a listing keeps them marked, as it may not show them.
	inflight map[netip.Addr]int
	// relist asks the next pick to list the subnet again (conflicts), while
	// the index and the gauges keep using the current listing.
	relist bool
	// listing is closed when the listing in flight ends, with listErr.
	listing chan struct{}
	listErr error
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
	return a.listed(ctx, p, false)
}

// listed returns the pool's subnet view after a listing when it is stale
// (or always, with relist). One listing per subnet runs at a time: callers
// that find one in flight wait for its result instead of listing the
// subnet again, so a burst of admissions after a conflict, or during the
// background refresh, costs one listing, not one each. A relist keeps the
// current view in use while it lists: admissions are not held up by it.
func (a *Allocator) listed(ctx context.Context, p *Pool, relist bool) (*occupancy, error) {
	a.mu.Lock()
	o, ok := a.occ[p.SubnetID()]
	if !ok {
		o = &occupancy{subnet: p.SubnetID(), holders: map[netip.Addr]Holder{}, spaces: map[string]*addrspace.Space{}, mine: newIndex(), inflight: map[netip.Addr]int{}}
		a.occ[p.SubnetID()] = o
	}
	a.mu.Unlock()

	o.mu.Lock()
	fresh := !o.loaded.IsZero() && a.clock.Since(o.loaded) < a.ttl && !o.relist
	if fresh && !relist {
		o.mu.Unlock()
		return o, nil
	}
	wait := o.listing
	joining := wait != nil
	if wait == nil {
		// The listing serves every caller waiting on it: it runs on its own
		// deadline, not the context of the admission that happened to
		// start it, which may end first.
		done := make(chan struct{})
		o.listing, wait = done, done
		go func() {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listTimeout)
			defer cancel()
			err := a.list(lctx, p, o)
			o.mu.Lock()
			o.listing, o.listErr = nil, err
			o.mu.Unlock()
			close(done)
		}()
	}
	o.mu.Unlock()
	if joining && a.joined != nil {
		a.joined()
	}
	var err error
	select {
	case <-wait:
		o.mu.Lock()
		err = o.listErr
		o.mu.Unlock()
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return nil, apiError(fmt.Sprintf("listing the addresses of pool %q", p.Name), err)
	}
	return o, nil
}

// listTimeout bounds one listing of a subnet: ⌈addresses/100⌉ pages.
const listTimeout = 2 * time.Minute

// list lists the pool's subnet and swaps the result into its view and
// index.
func (a *Allocator) list(ctx context.Context, p *Pool, o *occupancy) error {
	v6 := p.IPFamily == IPv6
	since := a.clock.Now()
	ips, err := a.cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: p.PrivateNetworkID, IPv6: &v6})
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Keep addresses marked by bookings in flight: they may not be listed yet.
	o.holders = make(map[netip.Addr]Holder, len(ips)+len(o.inflight))
	for addr := range o.inflight {
		o.holders[addr] = Holder{}
	}
	cluster := a.Config().ClusterName
	var mine []*indexed
	for _, ip := range ips {
		if ip.SubnetID == p.SubnetID() {
			o.holders[ip.Address] = holderOf(ip)
			if r, ok := indexEntry(ip, cluster, since); ok {
				mine = append(mine, r)
			}
		}
	}
	o.mine = o.mine.rebuilt(mine, since)
	o.since = since
	// And this replica's bookings that answered while the listing ran.
	for _, r := range o.mine.byID {
		if _, ok := o.holders[r.address]; !ok && !r.learned.Before(since) {
			o.holders[r.address] = Holder{IPID: r.id, Cluster: cluster, Service: r.service}
		}
	}
	for _, s := range o.spaces {
		s.Reset()
		for addr := range o.holders {
			s.Mark(addr)
		}
	}
	o.loaded, o.relist = a.clock.Now(), false
	return nil
}

// Start keeps the occupancy views and reservation indexes of the pools
// fresh in the background, so that admissions do not pay for listings and
// Stats stays current. It lists them once right away and then every
// refresh interval until ctx ends; a failed listing waits for the next
// tick (past the TTL, admissions list by themselves). It implements
// controller-runtime's manager.Runnable.
func (a *Allocator) Start(ctx context.Context) error {
	tick := a.clock.NewTicker(a.refresh)
	defer tick.Stop()
	for {
		if err := a.Refresh(ctx); err != nil && ctx.Err() == nil {
			a.log.Error(err, "refreshing the pools' occupancy")
		}
		a.firstOnce.Do(func() { close(a.firstListing) })
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
	}
}

// Listed reports whether Start's first listing of the pools has ended
// (failed ones included: admissions then list by themselves). A replica is
// ready only then, so that its first admissions book in one call instead of
// each listing what the index would have told.
func (a *Allocator) Listed() bool {
	select {
	case <-a.firstListing:
		return true
	default:
		return false
	}
}

// existing returns the subnet view of pool p, nil before its first listing.
func (a *Allocator) existing(p *Pool) *occupancy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.occ[p.SubnetID()]
}

// invalidate asks the next pick in a subnet to list it again; the index
// and the gauges keep using the current listing meanwhile.
func (a *Allocator) invalidate(p *Pool) {
	if o := a.existing(p); o != nil {
		o.mu.Lock()
		o.relist = true
		o.mu.Unlock()
	}
}

// markUsed records a booking or take-back of ours in the subnet's view and
// index, if there is one.
func (a *Allocator) markUsed(p *Pool, ip *scaleway.IP) {
	o := a.existing(p)
	if o == nil {
		return
	}
	o.mu.Lock()
	o.take(ip.Address, holderOf(ip))
	if r, ok := indexEntry(ip, a.Config().ClusterName, a.clock.Now()); ok {
		o.mine.put(r)
	}
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
