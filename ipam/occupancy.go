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

// view returns the pool's subnet view after a listing when it is stale
// (or always, with relist). One listing per subnet runs at a time: callers
// that find one in flight wait for its result instead of listing the
// subnet again, so a burst of admissions after a conflict, or during the
// background refresh, costs one listing, not one each. A relist (the
// refresh's, or one conflicts asked for) keeps the current view in use while
// it lists: only a missing view or one past its TTL makes an admission wait.
func (v *Inventory) view(ctx context.Context, p *Pool, relist bool) (*occupancy, error) {
	v.mu.Lock()
	o, ok := v.occ[p.SubnetID()]
	if !ok {
		o = &occupancy{subnet: p.SubnetID(), holders: map[netip.Addr]Holder{}, spaces: map[string]*addrspace.Space{}, mine: newIndex(), inflight: map[netip.Addr]int{}}
		v.occ[p.SubnetID()] = o
	}
	v.mu.Unlock()

	o.mu.Lock()
	fresh := !o.loaded.IsZero() && v.clock.Since(o.loaded) < v.ttl
	if fresh && !o.relist && !relist {
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
		go o.fill(context.WithoutCancel(ctx), v, p, done)
	}
	o.mu.Unlock()
	if fresh && !relist {
		// A relist that conflicts asked for runs in the background: the
		// view within its TTL serves admissions meanwhile (the admission
		// that met the conflicts picks elsewhere in the pool), and no
		// admission waits on a listing, its own or the refresh's.
		return o, nil
	}
	if joining && v.joined != nil {
		v.joined()
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

// fill lists the subnet into the view, then ends the listing in flight
// (done) with its result. It runs on its own deadline.
func (o *occupancy) fill(ctx context.Context, v *Inventory, p *Pool, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	since := v.clock.Now()
	ips, err := listSubnet(ctx, v.cloud, p)
	// The view's lock only once the listing has answered.
	o.mu.Lock()
	if err == nil {
		o.load(ips, v.Config().ClusterName, since)
		o.loaded, o.relist = v.clock.Now(), false
	}
	o.listing, o.listErr = nil, err
	o.mu.Unlock()
	close(done)
}

// listTimeout bounds one listing of a subnet: ⌈addresses/100⌉ pages.
const listTimeout = 2 * time.Minute

// listSubnet lists every IP of the pool's subnet's family on its network.
func listSubnet(ctx context.Context, cloud scaleway.Cloud, p *Pool) ([]*scaleway.IP, error) {
	v6 := p.IPFamily == IPv6
	return cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: p.PrivateNetworkID, IPv6: &v6})
}

// load swaps a listing of the subnet that started at since into the view
// and the index.
func (o *occupancy) load(ips []*scaleway.IP, cluster string, since time.Time) {
	// Keep addresses marked by bookings in flight: they may not be listed yet.
	o.holders = make(map[netip.Addr]Holder, len(ips)+len(o.inflight))
	for addr := range o.inflight {
		o.holders[addr] = Holder{}
	}
	var mine []*indexed
	for _, ip := range ips {
		if ip.SubnetID == o.subnet {
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
}

// Start keeps the occupancy views and reservation indexes of the pools
// fresh in the background, so that admissions do not pay for listings and
// Stats stays current. It lists them once right away and then every
// refresh interval until ctx ends; a failed listing waits for the next
// tick (past the TTL, admissions list by themselves). It implements
// controller-runtime's manager.Runnable.
func (v *Inventory) Start(ctx context.Context) error {
	tick := v.clock.NewTicker(v.refresh)
	defer tick.Stop()
	for {
		if err := v.Refresh(ctx); err != nil && ctx.Err() == nil {
			v.log.Error(err, "refreshing the pools' occupancy")
		}
		v.firstOnce.Do(func() { close(v.firstListing) })
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
func (v *Inventory) Listed() bool {
	select {
	case <-v.firstListing:
		return true
	default:
		return false
	}
}

// existing returns the subnet view of pool p, nil before its first listing.
func (v *Inventory) existing(p *Pool) *occupancy {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.occ[p.SubnetID()]
}

// record notes a booking or take-back of ours in the subnet's view and
// index, if there is one.
func (v *Inventory) record(p *Pool, ip *scaleway.IP) {
	o := v.existing(p)
	if o == nil {
		return
	}
	o.mu.Lock()
	o.take(ip.Address, holderOf(ip))
	if r, ok := indexEntry(ip, v.Config().ClusterName, v.clock.Now()); ok {
		o.mine.put(r)
	}
	o.mu.Unlock()
}

// holder looks up who holds addr in the subnet's view; with look, after a
// conflict, it lists the subnet when the view does not know.
func (v *Inventory) holder(ctx context.Context, p *Pool, addr netip.Addr, look bool) (Holder, bool) {
	known := func() (Holder, bool) {
		o := v.existing(p)
		if o == nil || !addr.IsValid() {
			return Holder{}, false
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		h, ok := o.holders[addr]
		return h, ok && h.IPID != ""
	}
	if h, ok := known(); ok || !look {
		return h, ok
	}
	// A denial that names the holder is worth waiting for a listing.
	if _, err := v.view(ctx, p, true); err == nil {
		return known()
	}
	return Holder{}, false
}

// pickOutcome is how the booking of a picked address went.
type pickOutcome int

const (
	pickBooked pickOutcome = iota
	// pickTaken: someone the view did not know of holds it.
	pickTaken
	// pickFailed: the booking failed for another reason.
	pickFailed
)

// pick chooses a free address in p's ranges. Unless it only predicts (a
// dry run, settle is nil), the address is marked used before the booking,
// so concurrent admissions pick different ones, and the caller reports how
// the booking went with settle: a failed booking frees the address; a
// taken one keeps it marked until the next listing and moves picking
// elsewhere in the pool (another replica picking in the same order would
// otherwise go on colliding address after address), and relist asks the
// next pick for a listing.
func (v *Inventory) pick(ctx context.Context, p *Pool, predict bool) (addr netip.Addr, settle func(how pickOutcome, relist bool), err error) {
	o, err := v.view(ctx, p, false)
	if err != nil {
		return netip.Addr{}, nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s, err := o.space(p)
	if err != nil {
		return netip.Addr{}, nil, err
	}
	if addr, err = s.Pick(); err != nil {
		return netip.Addr{}, nil, exhausted(p, s.Used(), s.Size())
	}
	if predict {
		return addr, nil, nil
	}
	o.take(addr, Holder{})
	o.inflight[addr]++
	return addr, func(how pickOutcome, relist bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.inflight[addr]--; o.inflight[addr] <= 0 {
			delete(o.inflight, addr)
		}
		switch how {
		case pickFailed:
			o.free(addr)
		case pickTaken:
			s.SeekFree(v.rand)
			o.relist = o.relist || relist
		}
	}, nil
}
