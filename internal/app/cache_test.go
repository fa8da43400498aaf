package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
)

// TestCacheTrimsServices: the manager's cache stores Services trimmed, and
// only Services.
func TestCacheTrimsServices(t *testing.T) {
	svc := fixtures.Service("payments", "api", map[string]string{
		ccm.AnnotationPrivateIPIDs: "bd66e0e0-2e8b-4c59-817f-afb5abb547f6", "kubectl.kubernetes.io/last-applied-configuration": "{}"})
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.9"}}
	seen := 0
	for obj, by := range cacheOptions().ByObject {
		switch obj.(type) {
		case *corev1.Service:
			seen++
			if by.Transform == nil {
				t.Fatal("Services are cached whole")
			}
			out, err := by.Transform(svc.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Service)
			// The ingress IPs stay: the convergence monitor reads them.
			if len(got.Spec.Ports) != 0 || len(got.Status.LoadBalancer.Ingress) != 1 || got.Status.LoadBalancer.Ingress[0].IP != "10.0.0.9" || len(got.Annotations) != 1 ||
				!ccm.Live(got) || len(ccm.ReferencedIDs(got)) != 1 {
				t.Fatalf("cached as %+v", got)
			}
		case *corev1.Namespace:
			// Namespaces are read for their labels, kept whole: they are few.
		default:
			t.Errorf("%T cached", obj)
		}
	}
	if seen != 1 {
		t.Fatalf("%d Service entries in the cache options", seen)
	}
}
