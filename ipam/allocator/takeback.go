package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

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
func (t *taker) stillHeld(ctx context.Context, svc types.NamespacedName, ip *scaleway.IP) error {
	refs, err := t.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return ipam.CacheUnavailable(err)
	}
	if slices.Contains(refs, svc) {
		return ipam.ServiceExists(svc, ip)
	}
	exists, err := t.refs.Exists(ctx, svc)
	if err != nil {
		return ipam.CacheUnavailable(err)
	}
	if exists {
		return ipam.StillHeld(svc, ip)
	}
	return nil
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
func (t *taker) takeBack(ctx context.Context, pool *ipam.Pool, svc types.NamespacedName, ns string, ip *scaleway.IP, dryRun bool) (*ipam.Reservation, error) {
	res := &ipam.Reservation{ID: ip.ID, Address: ip.Address, Pool: pool.Name, PrivateNetworkID: pool.PrivateNetworkID, Reused: true}
	e, _ := ipam.ParseEntry(ip.Tags)
	cluster := t.inv.Config().ClusterName
	if !e.Owns(cluster) {
		res.AdoptedFrom = e.Cluster
	}
	if dryRun {
		return res, nil
	}
	if !e.OrphanedSince.IsZero() || e.Pool != pool.Name || !e.Owns(cluster) || e.ShareNamespace() != ns {
		// The pool's current name too, in the same write: a renamed pool's
		// reservation is the new pool's from now on.
		e.OrphanedSince, e.ReleaseAt, e.Pool, e.Namespace = time.Time{}, time.Time{}, pool.Name, ns
		if !e.Owns(cluster) {
			// The uid is the other cluster's Service's: this cluster's
			// sweeper back-fills its own.
			e.Cluster, e.UID = cluster, ""
		}
		updated, err := t.cloud.SetTags(ctx, ip.ID, e.Tags())
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
