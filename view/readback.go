package view

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// list reads every object of the view the apiserver holds, a page at a
// time, with their digests and the pools' conditions.
func (m *Mirror) list(ctx context.Context) error {
	m.known, m.conditions = map[objectKey]uint64{}, map[string][]metav1.Condition{}
	for _, gvk := range []schema.GroupVersionKind{PoolKind, ReservationKind} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		for {
			err := m.o.Reader.List(ctx, list, client.Limit(500), client.Continue(list.GetContinue()))
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return ErrNoCRDs
			}
			if err != nil {
				return fmt.Errorf("listing the %ss of the view: %w", gvk.Kind, err)
			}
			for i := range list.Items {
				m.learn(gvk, &list.Items[i])
			}
			if list.GetContinue() == "" {
				break
			}
		}
	}
	return nil
}

// learn notes one object the apiserver holds. One whose status does not
// read as its type is noted with digest 0: written again.
func (m *Mirror) learn(gvk schema.GroupVersionKind, u *unstructured.Unstructured) {
	k := objectKey{gvk.Kind, u.GetNamespace(), u.GetName()}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	var status any = &ReservationStatus{}
	if gvk == PoolKind {
		status = &PoolStatus{}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, status); err != nil {
		m.known[k] = 0
		return
	}
	m.known[k] = digest(status)
	if ps, ok := status.(*PoolStatus); ok {
		m.conditions[k.name] = ps.Conditions
	}
}
