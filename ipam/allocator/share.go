package allocator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// share keeps a namespace to n addresses of the request's pool, its live
// and retained reservations counted, from ips: one fresh listing of the
// namespace's (see holdings), where another replica's bookings count too.
func (y *room) share(ctx context.Context, req ipam.Request, n int, ips []*ipam.Reservation) error {
	if len(ips) < n {
		return nil
	}
	hs, err := y.classify(ctx, req.Pool, ips)
	if err != nil {
		return err
	}
	f := y.policy.ShareFull(req.JudgedNamespace(), len(ips), n, req.Pool, hs)
	if err := y.makeRoom(ctx, req, f, ips); err != nil {
		return err
	}
	return f.AllInUse()
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
func (y *room) confirm(ctx context.Context, req ipam.Request, n int, res *ipam.Grant) error {
	ips, err := y.holdings(ctx, req)
	if err == nil && ipam.Within(ips, res.ID, n) {
		return nil
	}
	// On a context of its own: an admission whose deadline ran out while
	// it counted must still give back what it booked.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	if rerr := y.release(gctx, res); rerr != nil {
		y.log.Error(rerr, "giving back a booking over the namespace's share; the sweeper reclaims it", "ipamID", res.ID)
	}
	if err != nil {
		return err
	}
	return ipam.ShareRace(req.JudgedNamespace(), n, req.Pool)
}

// giveBackTimeout bounds the release of a booking over a share.
const giveBackTimeout = 5 * time.Second

// holdings lists this cluster's reservations of the request's namespace
// in its pool, oldest booking first: one listing of the namespace's tag on
// the pool's network, whatever the other namespaces hold there. A
// reservation booked before the tag existed is counted once the sweeper
// has back-filled it.
func (y *room) holdings(ctx context.Context, req ipam.Request) ([]*ipam.Reservation, error) {
	cluster, ns := y.inv.Config().ClusterName, req.JudgedNamespace()
	v6 := req.Pool.IPFamily == ipam.IPv6
	ips, err := y.listIPs(ctx, scaleway.ListFilter{PrivateNetworkID: req.Pool.PrivateNetworkID, Tags: []string{ipam.NamespaceTag(ns)}, IPv6: &v6, OldestFirst: true})
	if err != nil {
		return nil, ipam.APIError(fmt.Sprintf("counting the addresses namespace %s holds in pool %q", ns, req.Pool.Name), err)
	}
	// The tag filter matches any tag: the whole ledger is checked here.
	ips = slices.DeleteFunc(ips, func(ip *ipam.Reservation) bool { return !ipam.InShare(cluster, ns, req.Pool, ip) })
	slices.SortStableFunc(ips, func(x, y *ipam.Reservation) int {
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
func (y *room) lostBooking(ctx context.Context, req ipam.Request, n int, sticky *ipam.Reservation) (_ *ipam.Reservation, held []*ipam.Reservation, err error) {
	if sticky == nil || n == 0 || req.DryRun {
		return sticky, nil, nil
	}
	// Another cluster's (adoptFrom) is not counted when taken; one a
	// Service used (uid back-filled) is that Service's.
	if sticky.UID != "" || !sticky.Owns(y.inv.Config().ClusterName) {
		return sticky, nil, nil
	}
	if held, err = y.holdings(ctx, req); err != nil {
		return nil, nil, err
	}
	if !ipam.Within(held, sticky.ID, n) {
		return nil, held, nil
	}
	return sticky, held, nil
}
