package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

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
func (a *Allocator) sticky(ctx context.Context, req Request) (known map[string]bool, found *scaleway.IP, err error) {
	ids, known, fresh := a.inv.candidates(req)
	var ips []*scaleway.IP
	// The index holds this cluster's reservations only: a pool that adopts
	// other clusters' lists the Service's, whichever cluster tagged them.
	if fresh && len(req.Pool.AdoptFrom) == 0 {
		ips, err = a.reread(ctx, req.Service, ids)
	} else {
		ips, known, err = listService(ctx, a.cloud, req)
	}
	if err != nil {
		return nil, nil, err
	}
	found, err = a.choose(ctx, req, ips)
	return known, found, err
}

// reread reads the index's candidates again (usually one): those gone are
// forgotten, the others update the index.
func (a *Allocator) reread(ctx context.Context, svc types.NamespacedName, ids []string) ([]*scaleway.IP, error) {
	var ips []*scaleway.IP
	for _, id := range ids {
		readAt := a.clock.Now()
		ip, err := a.cloud.GetIP(ctx, id)
		if scaleway.Classify(err) == scaleway.KindNotFound {
			a.inv.forget(id, netip.Addr{})
			continue
		}
		if err != nil {
			return nil, apiError(fmt.Sprintf("reading the earlier reservation %s of Service %s", id, svc), err)
		}
		a.inv.learn(svc, ip, readAt)
		ips = append(ips, ip)
	}
	return ips, nil
}

// listService is the lookup without an index: one listing of the Service's
// reservations, all of them known.
func listService(ctx context.Context, cloud scaleway.Cloud, req Request) ([]*scaleway.IP, map[string]bool, error) {
	ips, err := serviceIPs(ctx, cloud, req)
	if err != nil {
		return nil, nil, apiError(fmt.Sprintf("looking up earlier reservations of Service %s", req.Service), err)
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
func (a *Allocator) choose(ctx context.Context, req Request, ips []*scaleway.IP) (*scaleway.IP, error) {
	cfg := a.Config()
	shown := a.inv.shownOn(req.Service)
	better := preference(cfg.ClusterName, shown)
	// Decide with the clock read after the reads: the later, the safer.
	now := a.clock.Now()
	var found *scaleway.IP
	for _, ip := range ips {
		ok, err := a.candidate(ctx, cfg, req.Pool, req.Service, req.Own, ip, now)
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
		if err := a.stillHeld(ctx, req.Service, found); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// preference orders the candidates of one Service: better reports whether
// ip is to be taken back rather than than. shown is when the Service cache
// last showed each ID on a Service of that name.
func preference(cluster string, shown map[string]time.Time) (better func(ip, than *scaleway.IP) bool) {
	// Used (uid back-filled) first; then one a Service of that name showed
	// (the previous incarnation's, though no leader back-filled its uid
	// yet); then pending bookings. Within a rank the latest shown, among
	// used ones the last given up, then the oldest booking.
	rank := func(ip *scaleway.IP) int {
		e, _ := ParseEntry(ip.Tags)
		switch _, seen := shown[ip.ID]; {
		case e.UID != "":
			return 2
		case seen:
			return 1
		}
		return 0
	}
	ours := func(ip *scaleway.IP) bool {
		e, _ := ParseEntry(ip.Tags)
		return e.Owns(cluster)
	}
	return func(ip, than *scaleway.IP) bool {
		// This cluster's own reservation before one adopted from another.
		if o, ot := ours(ip), ours(than); o != ot {
			return o
		}
		r, rt := rank(ip), rank(than)
		if r != rt {
			return r > rt
		}
		if s, st := shown[ip.ID], shown[than.ID]; !s.Equal(st) {
			return s.After(st) // a moved Service's latest address
		}
		if r > 0 {
			// Both used: the one given up last was the previous
			// incarnation's (a Service moved with allow-ip-change gave up
			// its older address first); not orphaned yet counts as latest.
			if o, ot := orphanedSince(ip), orphanedSince(than); !o.Equal(ot) {
				return o.IsZero() || (!ot.IsZero() && o.After(ot))
			}
		}
		return ip.CreatedAt.Before(than.CreatedAt)
	}
}

// serviceIPs lists the IPs tagged for the request's Service on the pool's
// network and family (any cluster, any pool: the caller filters), oldest
// booking first.
func serviceIPs(ctx context.Context, cloud scaleway.Cloud, req Request) ([]*scaleway.IP, error) {
	v6 := req.Pool.IPFamily == IPv6
	ips, err := cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: req.Pool.PrivateNetworkID, Tags: []string{ServiceTag(req.Service)}, IPv6: &v6, OldestFirst: true})
	// The order is asked for, and kept here too: stickiness must not depend
	// on an API default.
	slices.SortStableFunc(ips, func(x, y *scaleway.IP) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return ips, err
}

// candidate reports whether ip is a reservation of svc in pool that may be
// taken back at now: ours or one of a cluster the pool adopts from (live
// there or retained), referenced by no other live Service, attached to
// nothing but a Load Balancer (the caller refuses while it is), and not too
// close to its release. A reference by a Service of the same namespace/name
// does not count: it is the previous object, Terminating or gone but still
// in a lagging cache, since a CREATE of that name only succeeds once the old
// one is gone. own are the IDs the Service references itself (an UPDATE).
func (a *Allocator) candidate(ctx context.Context, cfg *Config, pool *Pool, svc types.NamespacedName, own []string, ip *scaleway.IP, now time.Time) (bool, error) {
	// The reservation's network and the pool's address space, not the
	// pool's name: a renamed pool keeps its Services' addresses.
	e, ok := ParseEntry(ip.Tags)
	if !ok || e.Service != svc || !pool.Holds(ip.SubnetID, ip.Address) {
		return false, nil
	}
	mine := e.Owns(cfg.ClusterName)
	if !mine && !slices.Contains(pool.AdoptFrom, e.Cluster) {
		return false, nil
	}
	if mine && slices.Contains(own, ip.ID) {
		return true, nil
	}
	refs, err := a.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return false, cacheError(err)
	}
	for _, r := range refs {
		if r != svc {
			return false, nil
		}
	}
	if ip.Resource != nil && ip.Resource.Type != scaleway.ResourceLoadBalancer {
		return false, nil
	}
	if !mine {
		// Another cluster's release is judged from its ledger alone.
		return a.policy.Adoptable(pool, e, now), nil
	}
	p, _ := cfg.PoolOf(e, ip.SubnetID, ip.Address)
	return a.policy.Reusable(p, e, now), nil
}

// stillHeld decides a re-create whose reservation is still attached to a
// Load Balancer. While a Service of that name exists, the CREATE cannot
// succeed: a live one is refused as existing (the apiserver would refuse
// it too, so say that instead of "retry"), a Terminating one (the CCM's
// finalizer) retryably. Once the object is gone, nil: the re-create takes
// its reservation although the previous Load Balancer still holds it.
// Scaleway deletes a Load Balancer asynchronously, up to a minute after the
// CCM let the Service go; the CCM attaches the IP to the new Load Balancer
// once the old one lets go, where a refusal would outlast the client's
// retries.
func (a *Allocator) stillHeld(ctx context.Context, svc types.NamespacedName, ip *scaleway.IP) error {
	refs, err := a.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return cacheError(err)
	}
	if slices.Contains(refs, svc) {
		return refuse(ReasonServiceExists, "Service %s already exists and holds address %s (IPAM ID %s) through its Load Balancer; delete it first, or update it instead of creating it", svc, ip.Address, ip.ID)
	}
	exists, err := a.refs.Exists(ctx, svc)
	if err != nil {
		return cacheError(err)
	}
	if exists {
		return refuse(ReasonStillHeld, "address %s (IPAM ID %s) is still held by the Load Balancer of the previous %s, which is being deleted; it is kept for this Service: retry in a moment", ip.Address, ip.ID, svc)
	}
	return nil
}

// takeBack hands a retained IP to its Service again. Clearing
// orphaned-since in the same admission is what keeps the sweeper from
// releasing it afterwards (its re-read sees the tags changed). One of
// another cluster's (adoptFrom) is re-tagged to this cluster in the same
// write, which its sweeper's re-read sees too: it never releases it.
func (a *Allocator) takeBack(ctx context.Context, pool *Pool, svc types.NamespacedName, ip *scaleway.IP, dryRun bool) (*Reservation, error) {
	res := &Reservation{ID: ip.ID, Address: ip.Address, Pool: pool.Name, PrivateNetworkID: pool.PrivateNetworkID, Reused: true}
	e, _ := ParseEntry(ip.Tags)
	cluster := a.Config().ClusterName
	if !e.Owns(cluster) {
		res.AdoptedFrom = e.Cluster
	}
	if dryRun {
		return res, nil
	}
	if !e.OrphanedSince.IsZero() || e.Pool != pool.Name || !e.Owns(cluster) {
		// The pool's current name too, in the same write: a renamed pool's
		// reservation is the new pool's from now on.
		e.OrphanedSince, e.ReleaseAt, e.Pool = time.Time{}, time.Time{}, pool.Name
		if !e.Owns(cluster) {
			// The uid is the other cluster's Service's: this cluster's
			// sweeper back-fills its own.
			e.Cluster, e.UID = cluster, ""
		}
		updated, err := a.cloud.SetTags(ctx, ip.ID, e.Tags())
		if scaleway.Classify(err) == scaleway.KindNotFound {
			a.inv.forget(ip.ID, ip.Address)
			return nil, errGone
		}
		if err != nil {
			return nil, apiError(fmt.Sprintf("taking back address %s retained for Service %s", ip.Address, svc), err)
		}
		if updated != nil {
			ip = updated
		}
	}
	a.inv.record(pool, ip)
	return res, nil
}

// errGone: the reservation to take back was released after it was read
// (another cluster's sweeper, whose release the ledger misstated); the
// request books a fresh one instead of failing on the API's "not found".
var errGone = errors.New("the reservation was released since it was read")

func orphanedSince(ip *scaleway.IP) time.Time {
	e, _ := ParseEntry(ip.Tags)
	return e.OrphanedSince
}

// cacheError is the refusal when the Service cache cannot answer: retryable,
// nothing was reserved.
func cacheError(err error) *Error {
	return &Error{Reason: ReasonCacheUnavailable, Err: err,
		Message: "the Service cache of scw-lb-ipam cannot tell which Services use this IP right now; nothing was reserved, apply again in a moment"}
}
