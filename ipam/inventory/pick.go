package inventory

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// existing returns the subnet view of pool p, nil before its first listing.
func (v *views) existing(p *ipam.Pool) *occupancy {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.occ[p.SubnetID()]
}

// record notes a booking or take-back of ours in the subnet's view and
// index, if there is one.
func (v *views) Record(p *ipam.Pool, ip *scaleway.IP) {
	o := v.existing(p)
	if o == nil {
		return
	}
	o.mu.Lock()
	o.take(ip.Address, ipam.HolderOf(ip))
	if r, ok := indexEntry(ip, v.cfg.Load().ClusterName, v.clock.Now()); ok {
		o.mine.put(r)
	}
	o.mu.Unlock()
}

// holder looks up who holds addr in the subnet's view; with look, after a
// conflict, it lists the subnet when the view does not know.
func (v *views) WhoHolds(ctx context.Context, p *ipam.Pool, addr netip.Addr, look bool) (ipam.Holder, bool) {
	known := func() (ipam.Holder, bool) {
		o := v.existing(p)
		if o == nil || !addr.IsValid() {
			return ipam.Holder{}, false
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
	return ipam.Holder{}, false
}

// pickOutcome is how the booking of a picked address went.
type Outcome int

const (
	PickBooked Outcome = iota
	// pickTaken: someone the view did not know of holds it.
	PickTaken
	// pickFailed: the booking failed for another reason.
	PickFailed
)

// pick chooses a free address in p's ranges. Unless it only predicts (a
// dry run, settle is nil), the address is marked used before the booking,
// so concurrent admissions pick different ones, and the caller reports how
// the booking went with settle: a failed booking frees the address; a
// taken one keeps it marked until the next listing and moves picking
// elsewhere in the pool (another replica picking in the same order would
// otherwise go on colliding address after address), and relist asks the
// next pick for a listing.
func (v *views) Pick(ctx context.Context, p *ipam.Pool, predict bool) (addr netip.Addr, settle func(how Outcome, relist bool), err error) {
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
		return netip.Addr{}, nil, &NoRoom{Used: s.Used(), Size: s.Size()}
	}
	if predict {
		return addr, nil, nil
	}
	o.take(addr, ipam.Holder{})
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
			s.SeekFree(v.rand)
			o.relist = o.relist || relist
		}
	}, nil
}

// Marked reports whether addr is marked used in p's subnet view: booked, or
// picked by a booking in flight or one that met a conflict.
func (v *views) Marked(p *ipam.Pool, addr netip.Addr) bool {
	o := v.existing(p)
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.holders[addr]
	return ok
}

// NoRoom is a pool whose subnet view has no free address left in it.
type NoRoom struct{ Used, Size uint64 }

func (e *NoRoom) Error() string { return fmt.Sprintf("no free address (%d/%d used)", e.Used, e.Size) }
