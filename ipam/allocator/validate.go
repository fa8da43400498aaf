package allocator

import (
	"context"
	"net/netip"
	"slices"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

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
func (a *Allocator) ValidateID(ctx context.Context, req ipam.IDRequest) (*ipam.Grant, error) {
	cfg := a.Config()
	id, svc := req.ID, req.Service
	ip, err := a.getIP(ctx, id)
	if err != nil {
		if scaleway.Classify(err) == scaleway.KindNotFound {
			a.inv.Forget(id, netip.Addr{})
			return nil, ipam.IDNotFound(id, cfg.Region)
		}
		return nil, ipam.APIError("reading IPAM IP "+id, err)
	}
	if ip.Region != "" && ip.Region != cfg.Region {
		return nil, ipam.IDInOtherRegion(id, ip.Region, cfg.Region)
	}
	pool, allowed := cfg.PoolOfID(req.JudgedNamespace(), ip.SubnetID, ip.Address)
	if pool == nil {
		return nil, ipam.IDOffPools(ip, req.JudgedNamespace(), allowed)
	}
	refs, err := a.refs.ReferencedBy(ctx, id)
	if err != nil {
		return nil, ipam.CacheUnavailable(err)
	}
	for _, other := range refs {
		if other != svc {
			return nil, ipam.UsedBy(ip, other)
		}
	}
	a.inv.Learn(svc, ip)
	if ip.Ours() {
		return a.validateOurs(ctx, cfg, req, ip, pool)
	}
	if ip.Resource != nil && !slices.Contains(req.Own, id) {
		// This Service's claim and a Load Balancer: its previous
		// incarnation's, which the CCM is tearing down (a helm --force, an
		// Argo CD replace). Retryable, as for a pool's reservation.
		holder, ok, err := a.claims.ClaimedBy(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok || holder != svc || ip.Resource.Type != scaleway.ResourceLoadBalancer {
			return nil, ipam.Attached(ip)
		}
		if err := a.taker.stillHeld(ctx, svc, ip); err != nil {
			return nil, err
		}
	}
	if !req.DryRun {
		if err := a.claims.Claim(ctx, id, svc); err != nil {
			return nil, err
		}
	}
	return &ipam.Grant{ID: ip.ID, Address: ip.Address, Pool: pool.Name, PrivateNetworkID: pool.PrivateNetworkID, BringYourOwn: true}, nil
}

// validateOurs takes one of this Service's own reservations back, under the
// same rules as the sticky path; or its reservation in a cluster the pool
// adopts from (a manifest restored into the new cluster), as a CREATE that
// names the pool adopts it. Another Service's, or another cluster's, is
// refused.
func (a *Allocator) validateOurs(ctx context.Context, cfg *ipam.Config, req ipam.IDRequest, ip *ipam.Reservation, subnetPool *ipam.Pool) (*ipam.Grant, error) {
	e := ip.Entry
	if e.Service != req.Service || !e.Owns(cfg.ClusterName) && !slices.Contains(subnetPool.AdoptFrom, e.Cluster) {
		return nil, ipam.ReservedForOther(ip)
	}
	pool, known := cfg.PoolOf(e, ip.SubnetID, ip.Address)
	if !known || !pool.Allows(req.JudgedNamespace()) || !e.Owns(cfg.ClusterName) {
		// Another cluster's pool names are its own: the address space
		// decides (poolOfID).
		pool = subnetPool
	}
	ok, err := a.taker.candidate(ctx, cfg, pool, req.Service, req.Own, ip, a.clock.Now())
	if err != nil {
		return nil, err
	}
	if !ok {
		if ip.Resource != nil {
			return nil, ipam.Attached(ip)
		}
		return nil, ipam.Releasing(ip, req.Service, pool, nil)
	}
	if ip.Resource != nil && !slices.Contains(req.Own, ip.ID) {
		if err := a.taker.stillHeld(ctx, req.Service, ip); err != nil {
			return nil, err
		}
	}
	res, err := a.taker.takeBack(ctx, pool, req.Service, req.JudgedNamespace(), ip, req.DryRun)
	if err == errGone {
		return nil, ipam.Releasing(ip, req.Service, pool, err)
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
	return false, ipam.APIError("reading Private Network "+id, err)
}
