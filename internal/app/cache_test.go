package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestCacheHoldsNoServices: the manager's cache holds Namespaces only, and
// its client reads Services from the apiserver: Services are the Service
// informer's, held as Records (servicecache.RecordService).
func TestCacheHoldsNoServices(t *testing.T) {
	for obj := range cacheOptions().ByObject {
		switch obj.(type) {
		case *corev1.Namespace:
			// Namespaces are read for their labels, kept whole: they are few.
		default:
			t.Errorf("%T cached", obj)
		}
	}
	disabled := clientOptions().Cache.DisableFor
	if len(disabled) != 1 {
		t.Fatalf("the client bypasses its cache for %v", disabled)
	}
	if _, ok := disabled[0].(*corev1.Service); !ok {
		t.Fatalf("the client reads %T from the apiserver, not Services", disabled[0])
	}
	svc := fixtures.Service("payments", "api", map[string]string{
		ccm.AnnotationPrivateIPIDs: "bd66e0e0-2e8b-4c59-817f-afb5abb547f6", "kubectl.kubernetes.io/last-applied-configuration": "{}"})
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.9"}}
	out, err := servicecache.RecordService(svc.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*servicecache.Record)
	// The ingress IPs stay: the convergence monitor reads them.
	if len(got.Ingress) != 1 || got.Ingress[0] != "10.0.0.9" || len(got.Annotations) != 1 || !got.Live() || len(got.ReferencedIDs()) != 1 {
		t.Fatalf("held as %+v", got)
	}
}
