package ipam

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// share keeps a namespace to n addresses of the request's pool, its live
// and retained reservations counted, from held: one fresh listing of the
// namespace's (see holdings), where another replica's bookings count too.
func (y *yielder) share(ctx context.Context, req Request, n int, ips []*scaleway.IP) error {
	if len(ips) < n {
		return nil
	}
	ns := req.Service.Namespace
	what := fmt.Sprintf("namespace %s holds %d/%d addresses of pool %q", ns, len(ips), n, req.Pool.Name)
	return y.makeRoom(ctx, req, what, "of them", heldOf(ips), func(live []held) error {
		return refuse(ReasonShareExhausted, "%s, all used by its live Services: %s; delete one of them or ask for another pool", what, services(live))
	})
}

// within reports whether id is among the n oldest of ips: a reservation
// the namespace's share has room for, in every order of bookings.
func within(ips []*scaleway.IP, id string, n int) bool {
	i := slices.IndexFunc(ips, func(ip *scaleway.IP) bool { return ip.ID == id })
	return i >= 0 && i < n
}

// confirm checks a booking against the namespace's share once it is made:
// two admissions (two replicas) that both found one address left have
// both booked, and every confirm lists both. The newer bookings give
// theirs back, so the namespace ends at its share in every order.
//
// A booking adopted after a lost answer (not Booked) is checked too, but
// never released here: it may be another admission's of the same Service
// (see Allocator.book); the sweeper reclaims it if no Service takes it.
// When the count cannot be listed, the booking is given back: a share is
// kept closed, as a cache that cannot answer is.
func (y *yielder) confirm(ctx context.Context, req Request, n int, res *Reservation) error {
	ips, err := y.holdings(ctx, req)
	if err == nil && within(ips, res.ID, n) {
		return nil
	}
	// On a context of its own: an admission whose deadline ran out while
	// it counted must still give back what it booked.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	if rerr := y.a.Release(gctx, res); rerr != nil {
		y.a.log.Error(rerr, "giving back a booking over the namespace's share; the sweeper reclaims it", "ipamID", res.ID)
	}
	if err != nil {
		return err
	}
	return &Error{Reason: ReasonYielding, RetryAfter: time.Second,
		Message: fmt.Sprintf("namespace %s reached its %d addresses of pool %q while this admission booked (another one booked at the same moment); nothing was reserved, retry", req.Service.Namespace, n, req.Pool.Name)}
}

// giveBackTimeout bounds the release of a booking over a share.
const giveBackTimeout = 5 * time.Second

// holdings lists this cluster's reservations of the request's namespace
// in its pool, oldest booking first: one listing of the namespace's tag on
// the pool's network, whatever the other namespaces hold there. A
// reservation booked before the tag existed is counted once the sweeper
// has back-filled it.
func (y *yielder) holdings(ctx context.Context, req Request) ([]*scaleway.IP, error) {
	cluster := y.a.Config().ClusterName
	v6 := req.Pool.IPFamily == IPv6
	ips, err := y.a.cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: req.Pool.PrivateNetworkID, Tags: []string{NamespaceTag(req.Service.Namespace)}, IPv6: &v6, OldestFirst: true})
	if err != nil {
		return nil, apiError(fmt.Sprintf("counting the addresses namespace %s holds in pool %q", req.Service.Namespace, req.Pool.Name), err)
	}
	// The tag filter matches any tag: the whole ledger is checked here.
	ips = slices.DeleteFunc(ips, func(ip *scaleway.IP) bool {
		e, ok := ParseEntry(ip.Tags)
		return !ok || !e.Owns(cluster) || e.Service.Namespace != req.Service.Namespace || !req.Pool.Holds(ip.SubnetID, ip.Address)
	})
	slices.SortStableFunc(ips, func(x, y *scaleway.IP) int {
		return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), strings.Compare(x.ID, y.ID))
	})
	return ips, nil
}

// lostBooking checks the reservation sticky found for req against the
// namespace's share n: a booking no Service was given (its answer lost,
// then the admission failed) counts like a new one, as taken back beyond
// the share the namespace would end over it. Such a one is dropped
// (nil), left to the sweeper's pending grace. held is the namespace's
// listing when one was made, for the share's count.
func (y *yielder) lostBooking(ctx context.Context, req Request, n int, sticky *scaleway.IP) (_ *scaleway.IP, held []*scaleway.IP, err error) {
	if sticky == nil || n == 0 || req.DryRun {
		return sticky, nil, nil
	}
	// Another cluster's (adoptFrom) is not counted when taken; one a
	// Service used (uid back-filled) is that Service's.
	if e, _ := ParseEntry(sticky.Tags); e.UID != "" || !e.Owns(y.a.Config().ClusterName) {
		return sticky, nil, nil
	}
	if held, err = y.holdings(ctx, req); err != nil {
		return nil, nil, err
	}
	if !within(held, sticky.ID, n) {
		return nil, held, nil
	}
	return sticky, held, nil
}
