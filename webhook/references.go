package webhook

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// IndexPrivateIPIDs indexes Services by the IPAM IDs in their
// private-ip-ids annotation.
const IndexPrivateIPIDs = "scw-lb-ipam.io/private-ip-ids"

// IndexServices registers IndexPrivateIPIDs with a cache.
func IndexServices(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Service{}, IndexPrivateIPIDs, liveIDs)
}

// liveIDs is the index function: the IDs of live Services only.
func liveIDs(o client.Object) []string {
	svc, ok := o.(*corev1.Service)
	if !ok || !Live(svc) {
		return nil
	}
	return ReferencedIDs(svc)
}

// The CCM's own marks on a Service whose Load Balancer exists.
const (
	// AnnotationLoadBalancerID is written by the CCM once it created the
	// Load Balancer ("<zone>/<lb-id>").
	AnnotationLoadBalancerID = "service.beta.kubernetes.io/scw-loadbalancer-id"
	// FinalizerLoadBalancerCleanup is added by the cloud-provider service
	// controller before it creates the Load Balancer and removed once the
	// Load Balancer is gone.
	FinalizerLoadBalancerCleanup = "service.kubernetes.io/load-balancer-cleanup"
)

// HasLoadBalancer reports whether the CCM already made a Load Balancer for
// the Service: an ingress in its status, the CCM's LB ID annotation, or the
// cleanup finalizer. Giving such a Service IDs would make the CCM re-attach
// its Private Network: a new address and an outage.
func HasLoadBalancer(svc *corev1.Service) bool {
	return len(svc.Status.LoadBalancer.Ingress) > 0 || svc.Annotations[AnnotationLoadBalancerID] != "" ||
		slices.Contains(svc.Finalizers, FinalizerLoadBalancerCleanup)
}

// Live reports whether a Service holds its IPs: a LoadBalancer not being
// deleted.
func Live(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.DeletionTimestamp == nil
}

// ReferencedIDs are the IPAM IDs a Service hands to the CCM.
func ReferencedIDs(svc *corev1.Service) []string {
	v := svc.Annotations[AnnotationPrivateIPIDs]
	if v == "" {
		return nil
	}
	var out []string
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// References answers the allocator's "who references this ID" from the
// indexed Service cache.
type References struct {
	Reader client.Reader
}

var _ ipam.References = References{}

// ReferencedBy lists the live Services referencing id, from memory, within
// the admission's deadline.
func (r References) ReferencedBy(ctx context.Context, id string) ([]types.NamespacedName, error) {
	var list corev1.ServiceList
	if err := r.Reader.List(ctx, &list, client.MatchingFields{IndexPrivateIPIDs: id}); err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, client.ObjectKeyFromObject(&list.Items[i]))
	}
	return out, nil
}
