package request

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// InScope: a LoadBalancer Service the CCM serves. One with
// spec.loadBalancerClass belongs to another load-balancer controller
// (MetalLB, Cilium, kube-vip): the CCM ignores it, so would a reservation.
func InScope(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// OptedIn reads a namespace's opt-in label (LabelEnabled) through r; a nil
// r opts every namespace in. A namespace that cannot be read is an error,
// never a "no": the caller decides whether to ask again elsewhere.
func OptedIn(ctx context.Context, r client.Reader, namespace string) (bool, error) {
	if r == nil {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, err
	}
	return ns.Labels[LabelEnabled] == "true", nil
}

// Unreserved reports whether a live LoadBalancer Service that carries no
// private-ip-ids should have had a reservation: it is in scope, in a
// namespace neither excluded nor left out (namespaces reads the opt-in
// label), and asks for one or falls under a default pool. what names the
// request for the report. The rules are the webhook's own: a Service it
// would have reserved for is one the sweeper reports.
func Unreserved(ctx context.Context, cfg *ipam.Config, namespaces client.Reader, excluded []string, svc *corev1.Service) (bool, string, error) {
	if !InScope(svc) || slices.Contains(excluded, svc.Namespace) {
		return false, "", nil
	}
	opted, err := OptedIn(ctx, namespaces, svc.Namespace)
	if err != nil || !opted {
		return false, "", err
	}
	ask, err := Parse(svc.Annotations)
	if err != nil {
		return false, "", nil
	}
	p, err := NewPlan(cfg, svc.Namespace, ask)
	if err != nil || p == nil {
		return false, "", nil
	}
	return true, p.Describe(), nil
}
