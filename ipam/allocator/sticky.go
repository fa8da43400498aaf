package allocator

import (
	"context"
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
func (t *taker) sticky(ctx context.Context, req ipam.Request) (known map[string]bool, found *scaleway.IP, err error) {
	ids, known, fresh := t.inv.Candidates(req)
	var ips []*scaleway.IP
	// The index holds this cluster's reservations only: a pool that adopts
	// other clusters' lists the Service's, whichever cluster tagged them.
	if fresh && len(req.Pool.AdoptFrom) == 0 {
		ips, err = t.reread(ctx, req.Service, ids)
	} else {
		ips, known, err = listService(ctx, t.cloud, req)
	}
	if err != nil || len(ips) == 0 {
		return known, nil, err
	}
	found, err = t.choose(ctx, req, ips)
	return known, found, err
}

// reread reads the index's candidates again (usually one): those gone are
// forgotten, the others update the index.
func (t *taker) reread(ctx context.Context, svc types.NamespacedName, ids []string) ([]*scaleway.IP, error) {
	var ips []*scaleway.IP
	for _, id := range ids {
		readAt := t.clock.Now()
		ip, err := t.cloud.GetIP(ctx, id)
		if scaleway.Classify(err) == scaleway.KindNotFound {
			t.inv.Forget(id, netip.Addr{})
			continue
		}
		if err != nil {
			return nil, ipam.APIError(fmt.Sprintf("reading the earlier reservation %s of Service %s", id, svc), err)
		}
		t.inv.Learn(svc, ip, readAt)
		ips = append(ips, ip)
	}
	return ips, nil
}

// listService is the lookup without an index: one listing of the Service's
// reservations, all of them known.
func listService(ctx context.Context, cloud scaleway.Cloud, req ipam.Request) ([]*scaleway.IP, map[string]bool, error) {
	ips, err := serviceIPs(ctx, cloud, req)
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
func (t *taker) choose(ctx context.Context, req ipam.Request, ips []*scaleway.IP) (*scaleway.IP, error) {
	cfg := t.inv.Config()
	shown := t.inv.ShownOn(req.Service)
	better := ipam.Preference(cfg.ClusterName, shown)
	// Decide with the clock read after the reads: the later, the safer.
	now := t.clock.Now()
	var found *scaleway.IP
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
func serviceIPs(ctx context.Context, cloud scaleway.Cloud, req ipam.Request) ([]*scaleway.IP, error) {
	v6 := req.Pool.IPFamily == ipam.IPv6
	ips, err := cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: req.Pool.PrivateNetworkID, Tags: []string{ipam.ServiceTag(req.Service)}, IPv6: &v6, OldestFirst: true})
	// The order is asked for, and kept here too: stickiness must not depend
	// on an API default.
	slices.SortStableFunc(ips, func(x, y *scaleway.IP) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return ips, err
}

// candidate reports whether ip is a reservation of svc in pool that may
// be taken back at now (Retention.TakesBack), from the live Services the
// cache shows referencing it.
func (t *taker) candidate(ctx context.Context, cfg *ipam.Config, pool *ipam.Pool, svc types.NamespacedName, own []string, ip *scaleway.IP, now time.Time) (bool, error) {
	refs, err := t.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return false, ipam.CacheUnavailable(err)
	}
	return t.policy.TakesBack(cfg, pool, svc, own, ip, refs, now), nil
}
