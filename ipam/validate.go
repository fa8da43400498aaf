package ipam

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// IDRequest is an IPAM ID a Service brings: scw-lb-ipam.io/ipam-ids, or a
// private-ip-ids written by hand or restored from a manifest.
type IDRequest struct {
	ID      string
	Service types.NamespacedName
	DryRun  bool
	// Own are the IDs the Service references now (an UPDATE).
	Own []string
}

// ValidateID checks an IPAM ID for a Service: it must exist in the region,
// sit on the Private Network of a pool the namespace may use, be attached to
// nothing, and be neither referenced by another live Service nor tagged to
// another Service. One GetIP.
//
// One of our own reservations of this Service (a restored manifest) goes
// through the sticky path: taken back (orphaned-since cleared) while that is
// safe, else refused with ReasonReleasing and the pool to book anew in.
// A bring-your-own ID is claimed, so that two replicas admitting two
// Services with the same ID at once cannot both win.
func (a *Allocator) ValidateID(ctx context.Context, req IDRequest) (*Reservation, error) {
	cfg := a.Config()
	id, svc := req.ID, req.Service
	readAt := a.clock.Now()
	ip, err := a.cloud.GetIP(ctx, id)
	if err != nil {
		if scaleway.Classify(err) == scaleway.KindNotFound {
			a.inv.forget(id, netip.Addr{})
			return nil, refuse(ReasonIDNotFound, "IPAM IP %s does not exist in region %s; check the ID (scw ipam ip get %s)", id, cfg.Region, id)
		}
		return nil, apiError("reading IPAM IP "+id, err)
	}
	if ip.Region != "" && ip.Region != cfg.Region {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s is in region %s, not %s where this cluster's Load Balancers live", id, ip.Region, cfg.Region)
	}
	pool, allowed := poolOfID(cfg, svc.Namespace, ip)
	if pool == nil {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is not on the Private Network of a pool namespace %s may use (%s); reserve it on one of those Private Networks", id, ip.Address, svc.Namespace, listOrNone(allowed))
	}
	refs, err := a.refs.ReferencedBy(ctx, id)
	if err != nil {
		return nil, cacheError(err)
	}
	for _, other := range refs {
		if other != svc {
			return nil, usedBy(ip, other)
		}
	}
	a.inv.learn(svc, ip, readAt)
	if e, ours := ParseEntry(ip.Tags); ours {
		return a.validateOurs(ctx, cfg, req, ip, e, pool)
	}
	if ip.Resource != nil && !slices.Contains(req.Own, id) {
		// This Service's claim and a Load Balancer: its previous
		// incarnation's, which the CCM is tearing down (a helm --force, an
		// Argo CD replace). Retryable, as for a pool's reservation.
		holder, ok, err := a.claims.Holder(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok || holder != svc || ip.Resource.Type != scaleway.ResourceLoadBalancer {
			return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is attached to %s; use an unattached IP", id, ip.Address, ip.Resource)
		}
		if err := a.stillHeld(ctx, svc, ip); err != nil {
			return nil, err
		}
	}
	if !req.DryRun {
		if err := a.claims.Claim(ctx, id, svc); err != nil {
			return nil, err
		}
	}
	return &Reservation{ID: ip.ID, Address: ip.Address, Pool: pool.Name, PrivateNetworkID: pool.PrivateNetworkID, BringYourOwn: true}, nil
}

// poolOfID is the pool of namespace whose address space holds ip, else the
// first on its subnet, else nil; allowed names the pools namespace may use.
func poolOfID(cfg *Config, namespace string, ip *scaleway.IP) (pool *Pool, allowed []string) {
	for _, p := range cfg.AllowedPools(namespace) {
		allowed = append(allowed, p.Name)
		if p.SubnetID() == ip.SubnetID && (pool == nil || p.Holds(ip.SubnetID, ip.Address) && !pool.Holds(ip.SubnetID, ip.Address)) {
			pool = p
		}
	}
	return pool, allowed
}

// validateOurs takes one of this Service's own reservations back, under the
// same rules as the sticky path; or its reservation in a cluster the pool
// adopts from (a manifest restored into the new cluster), as a CREATE that
// names the pool adopts it. Another Service's, or another cluster's, is
// refused.
func (a *Allocator) validateOurs(ctx context.Context, cfg *Config, req IDRequest, ip *scaleway.IP, e Entry, subnetPool *Pool) (*Reservation, error) {
	if e.Service != req.Service || !e.Owns(cfg.ClusterName) && !slices.Contains(subnetPool.AdoptFrom, e.Cluster) {
		return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is reserved for Service %s of cluster %s; use an IP reserved for this Service", ip.ID, ip.Address, e.Service, e.Cluster)
	}
	pool, known := cfg.PoolOf(e, ip.SubnetID, ip.Address)
	if !known || !pool.Allows(req.Service.Namespace) || !e.Owns(cfg.ClusterName) {
		// Another cluster's pool names are its own: the address space
		// decides (poolOfID).
		pool = subnetPool
	}
	ok, err := a.candidate(ctx, cfg, pool, req.Service, req.Own, ip, a.clock.Now())
	if err != nil {
		return nil, err
	}
	if !ok {
		if ip.Resource != nil {
			return nil, refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is attached to %s; use an unattached IP", ip.ID, ip.Address, ip.Resource)
		}
		return nil, &Error{Reason: ReasonReleasing, Fallback: pool,
			Message: "IPAM IP " + ip.ID + " (" + ip.Address.String() + ") of Service " + req.Service.String() + " is being released after its retention; a fresh address from pool " + pool.Name + " is reserved instead"}
	}
	if ip.Resource != nil && !slices.Contains(req.Own, ip.ID) {
		if err := a.stillHeld(ctx, req.Service, ip); err != nil {
			return nil, err
		}
	}
	res, err := a.takeBack(ctx, pool, req.Service, ip, req.DryRun)
	if err == errGone {
		return nil, &Error{Reason: ReasonReleasing, Fallback: pool, Err: err,
			Message: "IPAM IP " + ip.ID + " (" + ip.Address.String() + ") of Service " + req.Service.String() + " was released as it was taken back; a fresh address from pool " + pool.Name + " is reserved instead"}
	}
	return res, err
}

// PrivateNetworkExists asks VPC whether a Private Network a Service names
// exists in the region: the CCM would fail to attach one that does not,
// with the IP already booked. One GetPrivateNetwork.
func (a *Allocator) PrivateNetworkExists(ctx context.Context, id string) (bool, error) {
	_, err := a.cloud.GetPrivateNetwork(ctx, id)
	switch {
	case err == nil:
		return true, nil
	case scaleway.Classify(err) == scaleway.KindNotFound:
		return false, nil
	}
	return false, apiError("reading Private Network "+id, err)
}

func usedBy(ip *scaleway.IP, other types.NamespacedName) *Error {
	return refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is already used by Service %s; an IP serves one Service", ip.ID, ip.Address, other)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
