package ccm

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IndexPrivateIPIDs indexes Services by the IPAM IDs in their
// private-ip-ids annotation.
const IndexPrivateIPIDs = "scw-lb-ipam.io/private-ip-ids"

// IndexServices registers IndexPrivateIPIDs with a cache.
func IndexServices(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Service{}, IndexPrivateIPIDs, LiveIDs)
}

// LiveIDs is the index function: the IDs of live Services only.
func LiveIDs(o client.Object) []string {
	svc, ok := o.(*corev1.Service)
	if !ok || !Live(svc) {
		return nil
	}
	return ReferencedIDs(svc)
}

// References answers the allocator's "who references this ID" (it
// implements ipam.References) from the indexed Service cache.
type References struct {
	Reader client.Reader
}

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

// Exists reads the Service of that name from the cache, Terminating
// included.
func (r References) Exists(ctx context.Context, svc types.NamespacedName) (bool, error) {
	err := r.Reader.Get(ctx, svc, &corev1.Service{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
