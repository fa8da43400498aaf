package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// TestUnreservedOnTrimmedServices: the sweeper asks Unreserved about Services
// of the cache, which ccm.TrimService trimmed; its answer must be the one it
// gives on the Service as served, for every request the annotations make.
func TestUnreservedOnTrimmedServices(t *testing.T) {
	h := newHarness(t)
	const id = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
	served := func(ns string, a map[string]string) *corev1.Service {
		svc := fixtures.PrivateService(ns, "api", a)
		svc.TypeMeta = metav1.TypeMeta{}
		svc.UID, svc.ResourceVersion = "uid-api", "4242"
		svc.Labels = map[string]string{"app.kubernetes.io/name": "api"}
		svc.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"kind":"Service"}`
		svc.Annotations[ccm.AnnotationLoadBalancerID] = "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa"
		svc.Finalizers = []string{ccm.FinalizerLoadBalancerCleanup}
		svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.10.0.77"}}
		return svc
	}
	for name, tt := range map[string]struct {
		svc  *corev1.Service
		want bool
	}{
		"default pool":                   {served("web", nil), true},
		"a pool":                         {served("payments", ann(request.AnnotationPool, "dc-link")), true},
		"two pools":                      {served("payments", ann(request.AnnotationPool, "dc-link,general")), true},
		"an address":                     {served("payments", ann(request.AnnotationAddress, "172.16.35.201")), true},
		"IPAM IDs":                       {served("web", ann(request.AnnotationIPAMIDs, id)), true},
		"hand-written private-ip-ids":    {served("web", ann(ccm.AnnotationPrivateIPIDs, id)), true},
		"recorded addresses":             {served("payments", ann(ccm.AnnotationPrivateIPIDs, id, request.AnnotationAddresses, "172.16.35.200")), true},
		"pn-ids of the user":             {served("web", ann(ccm.AnnotationPNIDs, "5b2a2e1c-0d3f-4c59-9a6e-3f0c1a2b4c5d")), true},
		"allow-ip-change":                {served("web", ann(request.AnnotationAllowIPChange, "true")), true},
		"externally managed":             {served("web", ann(ccm.AnnotationExternallyManaged, "true")), false},
		"externally managed with a pool": {served("web", ann(ccm.AnnotationExternallyManaged, "true", request.AnnotationPool, "general")), false},
		"a pool not allowed here":        {served("web", ann(request.AnnotationPool, "dc-link")), false},
		"a bad annotation":               {served("web", ann(request.AnnotationAllowIPChange, "yes")), false},
		"not opted in":                   {served("plain", nil), false},
		"excluded namespace":             {served("kube-system", nil), false},
		"another controller's (loadBalancerClass)": {func() *corev1.Service {
			s := served("web", nil)
			class := "metallb.io/metallb"
			s.Spec.LoadBalancerClass = &class
			return s
		}(), false},
		"ClusterIP": {func() *corev1.Service {
			s := served("web", nil)
			s.Spec.Type = corev1.ServiceTypeClusterIP
			return s
		}(), false},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := ccm.TrimService(tt.svc.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			want, what, err := h.unreserved(tt.svc)
			gotWant, gotWhat, gotErr := h.unreserved(out.(*corev1.Service))
			if want != gotWant || what != gotWhat || (err == nil) != (gotErr == nil) {
				t.Fatalf("Unreserved: %v %q %v, trimmed %v %q %v", want, what, err, gotWant, gotWhat, gotErr)
			}
			if want != tt.want {
				t.Fatalf("Unreserved = %v (%q), want %v", want, what, tt.want)
			}
		})
	}
}
