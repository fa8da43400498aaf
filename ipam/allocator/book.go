package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// bookNew books a fresh reservation for req (or predicts one, in a dry
// run).
func (b *booker) bookNew(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Grant, error) {
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
func (b *booker) predict(ctx context.Context, req ipam.Request) (*ipam.Grant, error) {
	res := &ipam.Grant{Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID, Address: req.Address}
	if req.Address.IsValid() || !req.Pool.PicksAddresses() {
		if h, ok := b.inv.Subnets().WhoHolds(ctx, req.Pool, req.Address, false); ok {
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
func (b *booker) bookAddress(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Grant, error) {
	ip, adopted, err := b.book(ctx, req, req.Address, known)
	if err == nil {
		b.inv.Subnets().Record(req.Pool, ip)
		return booked(req, ip, adopted), nil
	}
	if scaleway.Classify(err) == scaleway.KindAddressTaken {
		h, _ := b.inv.Subnets().WhoHolds(ctx, req.Pool, req.Address, true)
		return nil, ipam.Taken(req.Address, req.Pool, h)
	}
	return nil, bookError(req, err)
}

// bookPicked picks free addresses from the pool's ranges until a booking
// succeeds. A conflict means the inventory's view was stale: picking goes
// on elsewhere in the pool, and every few conflicts the subnet is listed
// again.
func (b *booker) bookPicked(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Grant, error) {
	for attempt := 1; attempt <= MaxPickAttempts; attempt++ {
		addr, settle, err := b.pick(ctx, req.Pool, false)
		if err != nil {
			return nil, err
		}
		ip, adopted, err := b.book(ctx, req, addr, known)
		switch {
		case err == nil:
			settle(inventory.PickBooked, false)
			b.inv.Subnets().Record(req.Pool, ip)
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
func (b *booker) bookAny(ctx context.Context, req ipam.Request, known map[string]bool) (*ipam.Grant, error) {
	ip, adopted, err := b.book(ctx, req, netip.Addr{}, known)
	if err != nil {
		if scaleway.Classify(err) == scaleway.KindExhausted {
			total := req.Pool.Total()
			return nil, ipam.Exhausted(req.Pool, total, total)
		}
		return nil, bookError(req, err)
	}
	b.inv.Subnets().Record(req.Pool, ip)
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
func (b *booker) book(ctx context.Context, req ipam.Request, addr netip.Addr, known map[string]bool) (ip *ipam.Reservation, adopted bool, err error) {
	cfg := b.inv.Config()
	tags := ipam.Entry{Cluster: cfg.ClusterName, Pool: req.Pool.Name, Service: req.Service, Namespace: req.JudgedNamespace()}.Tags()
	bookReq := scaleway.BookRequest{PrivateNetworkID: req.Pool.PrivateNetworkID, IPv6: req.Pool.IPFamily == ipam.IPv6, Address: addr, Tags: tags}
	ip, err = b.bookIP(ctx, bookReq)
	if err == nil || scaleway.Classify(err) != scaleway.KindUnavailable || ctx.Err() != nil {
		return ip, false, err
	}
	ips, lerr := b.serviceIPs(ctx, req)
	if lerr != nil {
		return nil, false, err
	}
	for _, got := range slices.Backward(ips) { // oldest first: the newest is last
		if !known[got.ID] && ipam.SameTags(got.IP.Tags, tags) && (!addr.IsValid() || got.Address == addr) {
			return got, true, nil
		}
	}
	// Not booked: one more try.
	ip, err = b.bookIP(ctx, bookReq)
	return ip, false, err
}

func bookError(req ipam.Request, err error) error {
	if scaleway.Classify(err) == scaleway.KindExhausted {
		total := req.Pool.Total()
		return ipam.Exhausted(req.Pool, total, total)
	}
	return ipam.APIError(fmt.Sprintf("booking an address in pool %q for Service %s", req.Pool.Name, req.Service), err)
}

func reservation(req ipam.Request, ip *ipam.Reservation) *ipam.Grant {
	return &ipam.Grant{ID: ip.ID, Address: ip.Address, Pool: req.Pool.Name, PrivateNetworkID: req.Pool.PrivateNetworkID}
}

// booked is the reservation of a booking of this admission; an adopted one
// (see book) is not Booked: the admission does not release it on failure.
func booked(req ipam.Request, ip *ipam.Reservation, adopted bool) *ipam.Grant {
	r := reservation(req, ip)
	r.Booked = !adopted
	return r
}

// pick chooses a free address in p's ranges (inventory.Pick), wording what
// stops it for the user.
func (b *booker) pick(ctx context.Context, p *ipam.Pool, predict bool) (netip.Addr, func(inventory.Outcome, bool), error) {
	addr, settle, err := b.inv.Subnets().Pick(ctx, p, predict)
	var full *inventory.NoRoom
	switch {
	case errors.As(err, &full):
		return addr, nil, ipam.Exhausted(p, full.Used, full.Size)
	case err != nil:
		return addr, nil, ipam.APIError(fmt.Sprintf("listing the addresses of pool %q", p.Name), err)
	}
	return addr, settle, nil
}
