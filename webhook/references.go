package webhook

import (
	"context"
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

// ReferencedBy lists the live Services referencing id, from memory. When
// the cache cannot answer it reports a placeholder holder, so that the
// allocator neither reuses nor validates the ID blindly.
func (r References) ReferencedBy(id string) []types.NamespacedName {
	var list corev1.ServiceList
	if err := r.Reader.List(context.Background(), &list, client.MatchingFields{IndexPrivateIPIDs: id}); err != nil {
		return []types.NamespacedName{{Name: "<unknown: Service cache unavailable>"}}
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, client.ObjectKeyFromObject(&list.Items[i]))
	}
	return out
}
