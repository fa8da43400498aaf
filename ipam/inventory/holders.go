package inventory

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// WhoHolds looks up who holds addr in the subnet's view; with look, after a
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
