package claims

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// LabelClaim marks the Leases that claim a bring-your-own IPAM ID.
const LabelClaim = "scw-lb-ipam.io/claim"

// claimPrefix names a claim Lease: the prefix, then the IPAM ID (a UUID, so
// the name is a valid object name).
const claimPrefix = "scw-lb-ipam-claim-"

// Leases makes "one Service per bring-your-own IPAM ID" atomic across
// replicas with one Lease per ID in the release namespace: the apiserver's
// create is the arbiter, so of two replicas admitting two Services with the
// same ID at the same moment exactly one wins, whatever their caches say.
// A Lease rather than an IPAM tag because a bring-your-own IP is not ours to
// re-tag. The sweeper collects claims whose Service no longer uses the ID.
type Leases struct {
	// Client creates and updates the Leases; Reader reads Leases and
	// Services from the apiserver, not a cache (a cache is what lags).
	Client    client.Client
	Reader    client.Reader
	Namespace string
	// Fresh is how long a new claim is respected even though its Service
	// does not exist yet: its CREATE may still be in flight. At least the
	// admission deadline.
	Fresh time.Duration
	Clock clock.PassiveClock
}

func claimName(id string) string { return claimPrefix + id }

// Claim records svc as the one Service using the IPAM ID.
func (c *Leases) Claim(ctx context.Context, id string, svc types.NamespacedName) error {
	now := metav1.NewMicroTime(c.Clock.Now())
	holder := svc.String()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: claimName(id), Namespace: c.Namespace, Labels: map[string]string{LabelClaim: "ipam-id"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now},
	}
	err := c.Client.Create(ctx, lease)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return claimError(id, err)
	}
	if err := c.Reader.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		return claimError(id, err)
	}
	other := ""
	if lease.Spec.HolderIdentity != nil {
		other = *lease.Spec.HolderIdentity
	}
	if other == holder {
		// This Service again: a retry, an UPDATE, a re-create. The claim is
		// renewed, so that it counts as fresh until the Service shows in
		// the sweeper's cache, and a collection that read it before now
		// loses on its resourceVersion.
		lease.Spec.AcquireTime = &now
		if err := c.Client.Update(ctx, lease); err != nil {
			if apierrors.IsConflict(err) {
				return &ipam.Error{Reason: ipam.ReasonCacheUnavailable, Message: fmt.Sprintf("the claim of IPAM IP %s changed while it was renewed; nothing was reserved, apply again in a moment", id)}
			}
			return claimError(id, err)
		}
		return nil
	}
	if lease.Spec.AcquireTime != nil && c.Clock.Since(lease.Spec.AcquireTime.Time) < c.Fresh {
		return &ipam.Error{Reason: ipam.ReasonIDNotUsable, Message: fmt.Sprintf("IPAM IP %s is being claimed by Service %s right now; an IP serves one Service", id, other)}
	}
	inUse, err := c.uses(ctx, other, id)
	if err != nil {
		return claimError(id, err)
	}
	if inUse {
		return &ipam.Error{Reason: ipam.ReasonIDNotUsable, Message: fmt.Sprintf("IPAM IP %s is already used by Service %s; an IP serves one Service", id, other)}
	}
	// The claim is stale (its Service is gone or moved on): take it over.
	// The resourceVersion makes a concurrent takeover lose with a conflict.
	lease.Spec.HolderIdentity, lease.Spec.AcquireTime = &holder, &now
	if err := c.Client.Update(ctx, lease); err != nil {
		if apierrors.IsConflict(err) {
			return &ipam.Error{Reason: ipam.ReasonIDNotUsable, Message: fmt.Sprintf("IPAM IP %s is being claimed by another Service right now; an IP serves one Service", id)}
		}
		return claimError(id, err)
	}
	return nil
}

// ClaimedBy reads the claim of an IPAM ID from the apiserver.
func (c *Leases) ClaimedBy(ctx context.Context, id string) (types.NamespacedName, bool, error) {
	lease := &coordinationv1.Lease{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: claimName(id)}, lease); err != nil {
		if apierrors.IsNotFound(err) {
			return types.NamespacedName{}, false, nil
		}
		return types.NamespacedName{}, false, claimError(id, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return types.NamespacedName{}, false, nil
	}
	ns, name, _ := strings.Cut(*lease.Spec.HolderIdentity, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, true, nil
}

// uses reads the holder from the apiserver: does it still reference id?
func (c *Leases) uses(ctx context.Context, holder, id string) (bool, error) {
	ns, name, _ := strings.Cut(holder, "/")
	svc := &corev1.Service{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if !ccm.Live(svc) {
		return false, nil
	}
	for _, ref := range ccm.ReferencedIDs(svc) {
		if ref == id {
			return true, nil
		}
	}
	return false, nil
}

// Collect deletes the claims older than Fresh whose Service no longer uses
// their ID (inUse answers from the sweeper's live view). A claim is deleted
// only at the resourceVersion it was read at, so a takeover in between wins.
// It also returns the IDs of the claims it kept.
func (c *Leases) Collect(ctx context.Context, inUse func(id string, svc types.NamespacedName) bool) (int, []string, error) {
	var list coordinationv1.LeaseList
	if err := c.Reader.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{LabelClaim: "ipam-id"}); err != nil {
		return 0, nil, err
	}
	n := 0
	var claimed []string
	for i := range list.Items {
		l := &list.Items[i]
		id, ok := strings.CutPrefix(l.Name, claimPrefix)
		if !ok || l.Spec.HolderIdentity == nil {
			continue
		}
		ns, name, _ := strings.Cut(*l.Spec.HolderIdentity, "/")
		if (l.Spec.AcquireTime != nil && c.Clock.Since(l.Spec.AcquireTime.Time) < c.Fresh) || inUse(id, types.NamespacedName{Namespace: ns, Name: name}) {
			claimed = append(claimed, id)
			continue
		}
		err := c.Client.Delete(ctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})
		switch {
		case err == nil:
			n++
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			claimed = append(claimed, id)
		default:
			return n, nil, err
		}
	}
	return n, claimed, nil
}

func claimError(id string, err error) error {
	return &ipam.Error{Reason: ipam.ReasonCacheUnavailable, Err: err,
		Message: fmt.Sprintf("claiming IPAM IP %s for this Service failed (the Kubernetes API did not answer: %v); nothing was reserved, apply again in a moment", id, err)}
}
