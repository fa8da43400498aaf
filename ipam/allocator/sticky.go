package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// sticky finds the reservation of the same Service and pool to take back.
// Among the candidates it prefers the one a live Service actually used (its
// uid was back-filled, or, before the back-fill, the Service cache showed
// it on a Service of that name) over pending ones (bookings of failed or
// retried admissions), and the oldest booking first: a re-created Service
// gets the address its previous incarnation had, not one booked by a retry
// in between. When that reservation is still attached to the previous Load
// Balancer, the answer is a retryable refusal: booking another would move
// the Service to a new address once the old LB is gone.
//
// The candidates come from the reservation index, without a call when it
// holds none: a fresh Service costs its booking alone. Each candidate is
// re-read (GetIP) before it is handed out, and taken back under the
// release protocol: a stale index costs stickiness, never correctness.
// Without a fresh index (before the first listing, or after listings
// failed for longer than the TTL) the Service's reservations are listed.
//
// It also returns the IDs of every reservation of the Service it knows of,
// so that a booking whose answer was lost can be told apart from them.
func (t *taker) sticky(ctx context.Context, req ipam.Request) (known map[string]bool, found *ipam.Reservation, err error) {
	ids, known, fresh := t.inv.Candidates(req)
	var ips []*ipam.Reservation
	// The index holds this cluster's reservations only: a pool that adopts
	// other clusters' lists the Service's, whichever cluster tagged them.
	if fresh && len(req.Pool.AdoptFrom) == 0 {
		ips, err = t.reread(ctx, req.Service, ids)
	} else {
		ips, known, err = t.listService(ctx, req)
	}
	if err != nil || len(ips) == 0 {
		return known, nil, err
	}
	found, err = t.choose(ctx, req, ips)
	return known, found, err
}

// reread reads the index's candidates again (usually one): those gone are
// forgotten, the others update the index.
func (t *taker) reread(ctx context.Context, svc types.NamespacedName, ids []string) ([]*ipam.Reservation, error) {
	var ips []*ipam.Reservation
	for _, id := range ids {
		ip, err := t.getIP(ctx, id)
		if scaleway.Classify(err) == scaleway.KindNotFound {
			t.inv.Forget(id, netip.Addr{})
			continue
		}
		if err != nil {
			return nil, ipam.APIError(fmt.Sprintf("reading the earlier reservation %s of Service %s", id, svc), err)
		}
		t.inv.Learn(svc, ip)
		ips = append(ips, ip)
	}
	return ips, nil
}

// listService is the lookup without an index: one listing of the Service's
// reservations, all of them known.
func (d *deps) listService(ctx context.Context, req ipam.Request) ([]*ipam.Reservation, map[string]bool, error) {
	ips, err := d.serviceIPs(ctx, req)
	if err != nil {
		return nil, nil, ipam.APIError(fmt.Sprintf("looking up earlier reservations of Service %s", req.Service), err)
	}
	known := make(map[string]bool, len(ips))
	for _, ip := range ips {
		known[ip.ID] = true
	}
	return ips, known, nil
}

// choose picks among what was just read the reservation to take back: one
// the request may have, the one a live Service used first, then the oldest
// booking; nil when none. It refuses (retryably) while the chosen one is
// still attached to the previous Load Balancer.
func (t *taker) choose(ctx context.Context, req ipam.Request, ips []*ipam.Reservation) (*ipam.Reservation, error) {
	cfg := t.inv.Config()
	shown := t.inv.ShownOn(req.Service)
	better := ipam.Preference(cfg.ClusterName, shown)
	// Decide with the clock read after the reads: the later, the safer.
	now := t.clock.Now()
	var found *ipam.Reservation
	for _, ip := range ips {
		ok, err := t.candidate(ctx, cfg, req.Pool, req.Service, req.Own, ip, now)
		if err != nil {
			return nil, err
		}
		if !ok || (req.Address.IsValid() && ip.Address != req.Address) {
			continue
		}
		if found == nil || better(ip, found) {
			found = ip
		}
	}
	if found != nil && found.Resource != nil && !slices.Contains(req.Own, found.ID) {
		if err := t.stillHeld(ctx, req.Service, found); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// serviceIPs lists the IPs tagged for the request's Service on the pool's
// network and family (any cluster, any pool: the caller filters), oldest
// booking first.
func (d *deps) serviceIPs(ctx context.Context, req ipam.Request) ([]*ipam.Reservation, error) {
	v6 := req.Pool.IPFamily == ipam.IPv6
	ips, err := d.listIPs(ctx, scaleway.ListFilter{PrivateNetworkID: req.Pool.PrivateNetworkID, Tags: []string{ipam.ServiceTag(req.Service)}, IPv6: &v6, OldestFirst: true})
	// The order is asked for, and kept here too: stickiness must not depend
	// on an API default.
	slices.SortStableFunc(ips, func(x, y *ipam.Reservation) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return ips, err
}

// candidate reports whether ip is a reservation of svc in pool that may
// be taken back at now (Retention.TakesBack), from the live Services the
// cache shows referencing it.
func (t *taker) candidate(ctx context.Context, cfg *ipam.Config, pool *ipam.Pool, svc types.NamespacedName, own []string, ip *ipam.Reservation, now time.Time) (bool, error) {
	refs, err := t.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return false, ipam.CacheUnavailable(err)
	}
	return t.policy.TakesBack(cfg, pool, svc, own, ip, refs, now), nil
}

// stillHeld asks the Service cache what ipam.HeldByPrevious decides from:
// the live Services referencing ip, and whether one of svc's name exists.
func (t *taker) stillHeld(ctx context.Context, svc types.NamespacedName, ip *ipam.Reservation) error {
	refs, err := t.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return ipam.CacheUnavailable(err)
	}
	exists := false
	if !slices.Contains(refs, svc) {
		if exists, err = t.refs.Exists(ctx, svc); err != nil {
			return ipam.CacheUnavailable(err)
		}
	}
	return asError(ipam.HeldByPrevious(svc, ip, refs, exists))
}

// takeBack hands a retained IP to its Service again. Clearing
// orphaned-since in the same admission is what keeps the sweeper from
// releasing it afterwards (its re-read sees the tags changed). One of
// another cluster's (adoptFrom) is re-tagged to this cluster in the same
// write, which its sweeper's re-read sees too: it never releases it. ns is
// the namespace the Service is judged by: a namespace tag that names
// another (a Gateway's reservation booked before gatewayControllers named
// its controller, or back-filled from the Service tag) is corrected in the
// same write, so that the reservation counts in the right share.
func (t *taker) takeBack(ctx context.Context, pool *ipam.Pool, svc types.NamespacedName, ns string, ip *ipam.Reservation, dryRun bool) (*ipam.Grant, error) {
	res := &ipam.Grant{ID: ip.ID, Address: ip.Address, Pool: pool.Name, PrivateNetworkID: pool.PrivateNetworkID, Reused: true}
	e := ip.Entry
	cluster := t.inv.Config().ClusterName
	if !e.Owns(cluster) {
		res.AdoptedFrom = e.Cluster
	}
	if dryRun {
		return res, nil
	}
	if !e.OrphanedSince.IsZero() || e.Pool != pool.Name || !e.Owns(cluster) || e.JudgedNamespace() != ns {
		// The pool's current name too, in the same write: a renamed pool's
		// reservation is the new pool's from now on.
		e.OrphanedSince, e.ReleaseAt, e.Pool, e.Namespace = time.Time{}, time.Time{}, pool.Name, ns
		if !e.Owns(cluster) {
			// The uid is the other cluster's Service's: this cluster's
			// sweeper back-fills its own.
			e.Cluster, e.UID = cluster, ""
		}
		updated, err := t.setLedger(ctx, ip.ID, e)
		if scaleway.Classify(err) == scaleway.KindNotFound {
			t.inv.Forget(ip.ID, ip.Address)
			return nil, errGone
		}
		if err != nil {
			return nil, ipam.APIError(fmt.Sprintf("taking back address %s retained for Service %s", ip.Address, svc), err)
		}
		if updated != nil {
			ip = updated
		}
	}
	t.inv.Subnets().Record(pool, ip)
	return res, nil
}

// errGone: the reservation to take back was released after it was read
// (another cluster's sweeper, whose release the ledger misstated); the
// request books a fresh one instead of failing on the API's "not found".
var errGone = errors.New("the reservation was released since it was read")
