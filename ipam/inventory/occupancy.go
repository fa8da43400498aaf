package inventory

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// occupancy is what the allocator knows of one subnet's booked addresses,
// from a listing plus its own bookings since.
type occupancy struct {
	mu      sync.Mutex
	subnet  string
	loaded  time.Time
	holders map[netip.Addr]*ipam.Reservation
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

func (o *occupancy) space(p *ipam.Pool) (*addrspace.Space, error) {
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

func (o *occupancy) take(addr netip.Addr, h *ipam.Reservation) {
	// Every held address is marked in every space already (space, load
	// and free keep it so): a booking recorded after its pick marks nothing.
	if _, held := o.holders[addr]; !held {
		for _, s := range o.spaces {
			s.Mark(addr)
		}
	}
	o.holders[addr] = h
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
func (sub *Subnets) view(ctx context.Context, p *ipam.Pool, relist bool) (*occupancy, error) {
	sub.mu.Lock()
	o, ok := sub.occ[p.SubnetID()]
	if !ok {
		o = &occupancy{subnet: p.SubnetID(), holders: map[netip.Addr]*ipam.Reservation{}, spaces: map[string]*addrspace.Space{}, mine: newIndex(), inflight: map[netip.Addr]int{}}
		sub.occ[p.SubnetID()] = o
	}
	sub.mu.Unlock()

	o.mu.Lock()
	fresh := !o.loaded.IsZero() && sub.clock.Since(o.loaded) < sub.ttl
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
		go o.fill(context.WithoutCancel(ctx), sub, p, done)
	}
	o.mu.Unlock()
	if fresh && !relist {
		// A relist that conflicts asked for runs in the background: the
		// view within its TTL serves admissions meanwhile (the admission
		// that met the conflicts picks elsewhere in the pool), and no
		// admission waits on a listing, its own or the refresh's.
		return o, nil
	}
	if joining && sub.joined != nil {
		sub.joined()
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
		return nil, err
	}
	return o, nil
}

// fill lists the subnet into the view, then ends the listing in flight
// (done) with its result. It runs on its own deadline.
func (o *occupancy) fill(ctx context.Context, v *Subnets, p *ipam.Pool, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	since := v.clock.Now()
	ips, err := listSubnet(ctx, v.cloud, p)
	// The view's lock only once the listing has answered.
	o.mu.Lock()
	if err == nil {
		o.load(ipam.ReadAll(ips, since), v.cfg.Load().ClusterName, since)
		o.loaded, o.relist = v.clock.Now(), false
	}
	o.listing, o.listErr = nil, err
	o.mu.Unlock()
	close(done)
}

// listTimeout bounds one listing of a subnet: ⌈addresses/100⌉ pages.
const listTimeout = 2 * time.Minute

// listSubnet lists every IP of the pool's subnet's family on its network.
func listSubnet(ctx context.Context, cloud scaleway.Cloud, p *ipam.Pool) ([]*scaleway.IP, error) {
	v6 := p.IPFamily == ipam.IPv6
	return cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: p.PrivateNetworkID, IPv6: &v6})
}

// load swaps a listing of the subnet that started at since into the view
// and the index.
func (o *occupancy) load(listed []*ipam.Reservation, cluster string, since time.Time) {
	// Keep addresses marked by bookings in flight: they may not be listed yet.
	o.holders = make(map[netip.Addr]*ipam.Reservation, len(listed)+len(o.inflight))
	for addr := range o.inflight {
		o.holders[addr] = inFlight
	}
	var ours []*ipam.Reservation
	for _, r := range listed {
		if r.SubnetID == o.subnet {
			o.holders[r.Address] = r
			if mine(r, cluster) {
				ours = append(ours, r)
			}
		}
	}
	o.mine = o.mine.rebuilt(ours, since)
	o.since = since
	// And this replica's bookings that answered while the listing ran.
	for _, r := range o.mine.byID {
		if _, ok := o.holders[r.Address]; !ok && !r.ReadAt.Before(since) {
			o.holders[r.Address] = r
		}
	}
	for _, s := range o.spaces {
		s.Reset()
		for addr := range o.holders {
			s.Mark(addr)
		}
	}
}

// existing returns the subnet view of pool p, nil before its first listing.
func (sub *Subnets) existing(p *ipam.Pool) *occupancy {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.occ[p.SubnetID()]
}

// Record notes a booking or take-back of ours in the subnet's view and
// index, if there is one, learned now.
func (sub *Subnets) Record(p *ipam.Pool, r *ipam.Reservation) {
	o := sub.existing(p)
	if o == nil {
		return
	}
	learned := *r
	learned.ReadAt = sub.clock.Now()
	o.mu.Lock()
	o.take(r.Address, &learned)
	o.mine.record(&learned, sub.cfg.Load().ClusterName)
	o.mu.Unlock()
}

// inFlight holds an address picked by a booking that has not answered: a
// Reservation with no IP yet, never changed.
var inFlight = &ipam.Reservation{}

// Outcome is how the booking of a picked address went.
type Outcome int

const (
	PickBooked Outcome = iota
	// PickTaken: someone the view did not know of holds it.
	PickTaken
	// PickFailed: the booking failed for another reason.
	PickFailed
)

// Pick chooses a free address in p's ranges. Unless it only predicts (a
// dry run, settle is nil), the address is marked used before the booking,
// so concurrent admissions pick different ones, and the caller reports how
// the booking went with settle: a failed booking frees the address; a
// taken one keeps it marked until the next listing and moves picking
// elsewhere in the pool (another replica picking in the same order would
// otherwise go on colliding address after address), and relist asks the
// next pick for a listing.
func (sub *Subnets) Pick(ctx context.Context, p *ipam.Pool, predict bool) (addr netip.Addr, settle func(how Outcome, relist bool), err error) {
	o, err := sub.view(ctx, p, false)
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
		return netip.Addr{}, nil, &NoRoom{Used: s.Used(), Size: s.Size()}
	}
	if predict {
		return addr, nil, nil
	}
	o.take(addr, inFlight)
	o.inflight[addr]++
	return addr, func(how Outcome, relist bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.inflight[addr]--; o.inflight[addr] <= 0 {
			delete(o.inflight, addr)
		}
		switch how {
		case PickFailed:
			o.free(addr)
		case PickTaken:
			s.SeekFree(sub.rand)
			o.relist = o.relist || relist
		}
	}, nil
}

// Candidates are the IDs to re-read for req, in order of preference: the
// index's reservations of the Service in the pool, then the IDs the
// Service references (an UPDATE), then IDs the Service cache showed on a
// Service of that name that no listing has seen yet. known are all the
// IDs of the Service the inventory knows of; fresh is false when the
// pool's index is missing or older than the TTL.
func (v *Inventory) Candidates(req ipam.Request) (ids []string, known map[string]bool, fresh bool) {
	o := v.subnets.existing(req.Pool)
	if o == nil {
		return nil, nil, false
	}
	known = map[string]bool{}
	add := func(id string) {
		if !known[id] {
			known[id] = true
			ids = append(ids, id)
		}
	}
	v.subnets.mu.Lock()
	hints := maps.Clone(v.hints[req.Service])
	views := maps.Clone(v.subnets.occ)
	v.subnets.mu.Unlock()
	cfg, now := v.Config(), v.subnets.clock.Now()
	o.mu.Lock()
	fresh = !o.loaded.IsZero() && now.Sub(o.loaded) < v.subnets.ttl
	for _, r := range o.mine.of(req.Service) {
		// A Service that showed the ID after the index learned its tags
		// may have taken it back since: its orphaned-since is stale.
		hintedLater := hints[r.ID].After(r.ReadAt)
		if req.Pool.Covers(r.Address) && (!req.Address.IsValid() || r.Address == req.Address) && (hintedLater || mayBeReusable(v.policy, cfg, req.Pool.SubnetID(), r, now)) {
			add(r.ID)
		} else {
			known[r.ID] = true
		}
	}
	o.mu.Unlock()
	if !fresh {
		return nil, nil, false
	}
	for _, id := range req.Own {
		if !indexedElsewhere(views, id, req.Pool) {
			add(id)
		}
	}
	hinted := slices.Sorted(maps.Keys(hints))
	for _, id := range hinted {
		if !known[id] && !indexedElsewhere(views, id, req.Pool) {
			add(id)
		}
	}
	return ids, known, true
}
