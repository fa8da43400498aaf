package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestUnreservedOnRecords: the sweeper asks Unreserved about the Records
// of the Service informer (servicecache.RecordService); its answer must be the one
// the webhook's rules give on the Service as served, for every request the
// annotations make.
func TestUnreservedOnRecords(t *testing.T) {
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
			want, what, err := h.unreserved(tt.svc)
			if err != nil {
				t.Fatal(err)
			}
			if want != tt.want {
				t.Fatalf("Unreserved = %v (%q), want %v", want, what, tt.want)
			}
			// What the report names is the request the webhook reads on
			// the whole Service.
			if want {
				ask, err := request.Parse(tt.svc.Annotations)
				if err != nil {
					t.Fatal(err)
				}
				p, err := request.NewPlan(h.mutator.Allocator.Config(), tt.svc.Namespace, ask)
				if err != nil || p == nil || p.Describe() != what {
					t.Fatalf("Unreserved names %q, the webhook's plan %v (%v)", what, p, err)
				}
			}
		})
	}
}
