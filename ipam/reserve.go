package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

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
	if sticky != nil {
		return a.takeBack(ctx, req.Pool, req.Service, sticky, req.DryRun)
	}
	switch {
	case p.Disabled:
		return nil, refuse(ReasonPoolDisabled, "pool %q is disabled (draining): it keeps its reservations but takes no new ones; ask for another pool", p.Name)
	case !req.Address.IsValid() && !p.AutoAssigns():
		return nil, refuse(ReasonAddressRequired, "pool %q hands out only explicitly requested addresses (autoAssign: false); set scw-lb-ipam.io/address to an address in %s", p.Name, describeRanges(p))
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
