package inventory

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// WhoHolds looks up who holds addr in the subnet's view; with look, after a
// conflict, it lists the subnet when the view does not know.
func (sub *Subnets) WhoHolds(ctx context.Context, p *ipam.Pool, addr netip.Addr, look bool) (*ipam.Reservation, bool) {
	known := func() (*ipam.Reservation, bool) {
		o := sub.existing(p)
		if o == nil || !addr.IsValid() {
			return nil, false
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		h, ok := o.holders[addr]
		return h, ok && h.ID != ""
	}
	if h, ok := known(); ok || !look {
		return h, ok
	}
	// A denial that names the holder is worth waiting for a listing.
	if _, err := sub.view(ctx, p, true); err == nil {
		return known()
	}
	return nil, false
}

// Marked reports whether addr is marked used in p's subnet view: booked, or
// picked by a booking in flight or one that met a conflict.
func (sub *Subnets) Marked(p *ipam.Pool, addr netip.Addr) bool {
	o := sub.existing(p)
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

// HeldIn is what holds pool p in its subnet's view (nil: none known).
func (sub *Subnets) HeldIn(p *ipam.Pool) []*ipam.Reservation { return heldIn(sub.existing(p), p) }

func heldIn(o *occupancy, p *ipam.Pool) []*ipam.Reservation {
	holders, _ := o.holdersIn(p)
	return slices.Collect(maps.Values(holders))
}

// lastListing is the error of the last listing of the subnet, nil when it
// succeeded or none ended yet.
func (o *occupancy) lastListing() error {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.listErr
}

// holdersIn copies the booked addresses of pool p from its subnet's view;
// bookings still in flight are left out until they answer. listed is when
// the subnet was last listed, zero before its first listing (a nil view).
func (o *occupancy) holdersIn(p *ipam.Pool) (holders map[netip.Addr]*ipam.Reservation, listed time.Time) {
	holders = map[netip.Addr]*ipam.Reservation{}
	if o == nil {
		return holders, time.Time{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for addr, h := range o.holders {
		if h.ID != "" && p.Contains(addr) {
			holders[addr] = h
		}
	}
	return holders, o.loaded
}
