package servicecache

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
)

var _ toolscache.TransformFunc = RecordService

// servedService is a LoadBalancer Service as the apiserver serves it once
// the CCM made its Load Balancer, with what kubectl, Helm and the CCM leave
// on it: every field a reader might look at is set.
func servedService() *corev1.Service {
	local := corev1.ServiceInternalTrafficPolicyCluster
	single := corev1.IPFamilyPolicySingleStack
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "payments", Name: "api", UID: "7d1c1f0e-46c2-4f55-9a41-0c1f6a0b1e2d", ResourceVersion: "48213", Generation: 3,
			CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second)), // the apiserver keeps seconds
			Labels:            map[string]string{"app.kubernetes.io/name": "api", "app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{
				"scw-lb-ipam.io/pool":        "dc-link",
				"scw-lb-ipam.io/addresses":   "172.16.35.200",
				ccm.AnnotationPrivateIPIDs:   "bd66e0e0-2e8b-4c59-817f-afb5abb547f6",
				ccm.AnnotationPNIDs:          "5b2a2e1c-0d3f-4c59-9a6e-3f0c1a2b4c5d,7e3c9a41-2b6d-4f08-8c15-6a9d0e2f1b3c",
				ccm.AnnotationPrivate:        "true",
				ccm.AnnotationLoadBalancerID: "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa",
				"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2": "443",
				"kubectl.kubernetes.io/last-applied-configuration":              strings.Repeat(`{"apiVersion":"v1","kind":"Service"}`, 40),
				"meta.helm.sh/release-name":                                     "api",
				"meta.helm.sh/release-namespace":                                "payments",
				"service.beta.kubernetes.io/aws-load-balancer-type":             "nlb",
			},
			Finalizers:      []string{ccm.FinalizerLoadBalancerCleanup},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", UID: "u"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{}}}`)}},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app.kubernetes.io/name": "api"},
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 31443},
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 31080}},
			ClusterIP: "10.96.4.7", ClusterIPs: []string{"10.96.4.7"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
			SessionAffinity: corev1.ServiceAffinityNone, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 32000,
			InternalTrafficPolicy: &local, LoadBalancerSourceRanges: []string{"10.0.0.0/8"},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.16.35.200"}, {IP: "172.16.0.9"}}}},
	}
}

// cachedServices are Services as they reach the cache, one per case the
// readers of cached Services tell apart.
func cachedServices() map[string]*corev1.Service {
	edit := func(f func(*corev1.Service)) *corev1.Service {
		s := servedService()
		f(s)
		return s
	}
	now := metav1.Now()
	return map[string]*corev1.Service{
		"served":              edit(func(*corev1.Service) {}),
		"terminating":         edit(func(s *corev1.Service) { s.DeletionTimestamp = &now }),
		"ClusterIP":           edit(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }),
		"NodePort":            edit(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }),
		"no annotations":      edit(func(s *corev1.Service) { s.Annotations = nil }),
		"foreign annotations": edit(func(s *corev1.Service) { s.Annotations = map[string]string{"example.com/x": "y"} }),
		"IDs with blanks":     edit(func(s *corev1.Service) { s.Annotations[ccm.AnnotationPrivateIPIDs] = " a, ,b " }),
		"no IDs, a pool":      edit(func(s *corev1.Service) { delete(s.Annotations, ccm.AnnotationPrivateIPIDs) }),
		"empty IDs":           edit(func(s *corev1.Service) { s.Annotations[ccm.AnnotationPrivateIPIDs] = "" }),
		"an address":          edit(func(s *corev1.Service) { s.Annotations["scw-lb-ipam.io/address"] = "172.16.35.210" }),
		"IPAM IDs": edit(func(s *corev1.Service) {
			s.Annotations["scw-lb-ipam.io/ipam-ids"] = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
		}),
		"allow-ip-change":       edit(func(s *corev1.Service) { s.Annotations["scw-lb-ipam.io/allow-ip-change"] = "true" }),
		"externally managed":    edit(func(s *corev1.Service) { s.Annotations[ccm.AnnotationExternallyManaged] = "true" }),
		"an unknown annotation": edit(func(s *corev1.Service) { s.Annotations[annotationPrefix+"later"] = "x" }),
		"no status, no marks": edit(func(s *corev1.Service) {
			s.Status, s.Finalizers = corev1.ServiceStatus{}, nil
			delete(s.Annotations, ccm.AnnotationLoadBalancerID)
		}),
		"another namespace": edit(func(s *corev1.Service) { s.Namespace = "web" }),
		"other implementations' words": edit(func(s *corev1.Service) {
			s.Annotations[neighbours.AnnotationMetalLBIPs] = "172.16.35.201"
			s.Annotations[neighbours.AnnotationCalicoPools] = `["dc-link"]`
			s.Spec.LoadBalancerIP = "172.16.35.202"
		}),
		"a Gateway's Service": edit(func(s *corev1.Service) {
			s.Namespace = "envoy-gateway-system"
			s.Labels["gateway.envoyproxy.io/owning-gateway-namespace"] = "payments"
		}),
		"another controller's": edit(func(s *corev1.Service) {
			class := "metallb.io/metallb"
			s.Spec.LoadBalancerClass = &class
		}),
	}
}

// TestRecordKeepsWhatReadersRead asks every reader's question of each
// Service and of its Record: the answers must be the same.
func TestRecordKeepsWhatReadersRead(t *testing.T) {
	scheme := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	for name, full := range cachedServices() {
		t.Run(name, func(t *testing.T) {
			out, err := RecordService(full.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			rec := out.(*Record)
			if a, b := ccm.Live(full), rec.Live(); a != b {
				t.Errorf("ccm.Live: %v, record %v", a, b)
			}
			if a, b := full.Spec.Type == corev1.ServiceTypeLoadBalancer && full.Spec.LoadBalancerClass == nil, rec.Served(); a != b {
				t.Errorf("served: %v, record %v", a, b)
			}
			if a, b := ccm.ReferencedIDs(full), rec.ReferencedIDs(); !slices.Equal(a, b) {
				t.Errorf("ccm.ReferencedIDs: %q, record %q", a, b)
			}
			var live []string
			if ccm.Live(full) {
				live = ccm.ReferencedIDs(full)
			}
			if b := rec.LiveIDs(); !slices.Equal(live, b) {
				t.Errorf("LiveIDs: %q, record %q", live, b)
			}
			if a, b := client.ObjectKeyFromObject(full), rec.Key(); a != b {
				t.Errorf("key: %s, record %s", a, b)
			}
			if full.UID != rec.UID || full.ResourceVersion != rec.ResourceVersion {
				t.Errorf("UID, resourceVersion: %s %s, record %s %s", full.UID, full.ResourceVersion, rec.UID, rec.ResourceVersion)
			}
			// The webhook's held Events tell a new incarnation by them.
			if !full.CreationTimestamp.Time.Equal(rec.CreatedAt()) || (full.DeletionTimestamp != nil) != rec.Deleting() {
				t.Errorf("timestamps: %v %v, record %v %v", full.CreationTimestamp, full.DeletionTimestamp, rec.CreatedAt(), rec.Deleting())
			}
			if a, b := ccm.LoadBalancerID(full), rec.LoadBalancerID(); a != b {
				t.Errorf("ccm.LoadBalancerID: %q, record %q", a, b)
			}
			var ingress []string
			for _, in := range full.Status.LoadBalancer.Ingress {
				ingress = append(ingress, in.IP)
			}
			if !slices.Equal(ingress, rec.Ingress) {
				t.Errorf("ingress: %q, record %q", ingress, rec.Ingress)
			}
			// Informers hand objects without kind: the Event's reference
			// takes it from the scheme.
			bare := full.DeepCopy()
			bare.TypeMeta = metav1.TypeMeta{}
			ra, errA := reference.GetReference(scheme, bare)
			rb, errB := reference.GetReference(scheme, rec.Regarding())
			if errA != nil || errB != nil || !reflect.DeepEqual(ra, rb) {
				t.Errorf("Event reference: %+v (%v), record %+v (%v)", ra, errA, rb, errB)
			}
			// Every annotation of scw-lb-ipam and of the CCM, as written.
			ours := func(ann map[string]string) map[string]string {
				return maps.Collect(func(yield func(string, string) bool) {
					for k, v := range ann {
						if strings.HasPrefix(k, "scw-lb-ipam.io/") || strings.HasPrefix(k, "service.beta.kubernetes.io/scw-loadbalancer-") || slices.Contains(neighbours.OtherRequestAnnotations, k) {
							if !yield(k, v) {
								return
							}
						}
					}
				})
			}
			if a, b := ours(full.Annotations), rec.AnnotationMap(); !maps.Equal(a, b) {
				t.Errorf("annotations: %v, record %v", a, b)
			}
			for _, key := range []string{"scw-lb-ipam.io/pool", "scw-lb-ipam.io/address", "scw-lb-ipam.io/ipam-ids", "scw-lb-ipam.io/allow-ip-change", "scw-lb-ipam.io/addresses",
				ccm.AnnotationPrivateIPIDs, ccm.AnnotationPNIDs, ccm.AnnotationPrivate, ccm.AnnotationExternallyManaged, ccm.AnnotationLoadBalancerID} {
				if a, b := full.Annotations[key], rec.Annotation(key); a != b {
					t.Errorf("annotation %s: %q, record %q", key, a, b)
				}
			}
			// The words of other implementations and the Gateway's
			// namespace, as request.Read and request.JudgedNamespace read them.
			for _, key := range neighbours.OtherRequestAnnotations {
				if a, b := full.Annotations[key], rec.Annotation(key); a != b {
					t.Errorf("annotation %s: %q, record %q", key, a, b)
				}
			}
			if a, b := full.Labels["gateway.envoyproxy.io/owning-gateway-namespace"], rec.Label("gateway.envoyproxy.io/owning-gateway-namespace"); a != b || full.Spec.LoadBalancerIP != rec.LoadBalancerIP() {
				t.Errorf("Gateway label %q, loadBalancerIP %q; record %q, %q", a, full.Spec.LoadBalancerIP, b, rec.LoadBalancerIP())
			}
			// client-go may hand the transform what it already made.
			if again, _ := RecordService(rec); again != rec {
				t.Errorf("a Record was made again: %+v", again)
			}
		})
	}
}

// TestRecordDrops checks that what no reader needs is gone, the point of
// the transform.
func TestRecordDrops(t *testing.T) {
	served := servedService()
	vip := corev1.LoadBalancerIPModeVIP
	served.Status.LoadBalancer.Ingress[0].IPMode = &vip
	served.Status.LoadBalancer.Ingress = append(served.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{Hostname: "lb.example.com"})
	served.Status.Conditions = []metav1.Condition{{Type: "LoadBalancerPortsError", Status: metav1.ConditionFalse}}
	out, _ := RecordService(served)
	rec := out.(*Record)
	// Only the ingress IPs, which the convergence monitor compares with
	// the reserved addresses.
	if want := []string{"172.16.35.200", "172.16.0.9"}; !slices.Equal(rec.Ingress, want) {
		t.Errorf("ingress %q, want only the IPs %q", rec.Ingress, want)
	}
	for _, k := range []string{"kubectl.kubernetes.io/last-applied-configuration", "meta.helm.sh/release-name", "service.beta.kubernetes.io/aws-load-balancer-type"} {
		if _, ok := rec.AnnotationMap()[k]; ok {
			t.Errorf("annotation %s kept", k)
		}
	}
	if rec.rare != nil {
		t.Errorf("labels and loadBalancerIP %+v kept; only labels that may carry a Gateway's namespace are, and the Service has none", rec.rare)
	}
	if !slices.IsSortedFunc(rec.Annotations, func(a, b Annotation) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("annotations not sorted: %v", rec.Annotations)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{"scw-lb-ipam.io/enabled": "true"}}}
	if got, _ := RecordService(ns); got != ns {
		t.Errorf("a Namespace was changed: %+v", got)
	}
}

// BenchmarkRecordRetained reports what the Service informer keeps of a
// served LoadBalancer Service (retained-B/service: the live heap the
// Records hold, after a collection), the number to watch when a reader
// asks a Record to keep more: the informer holds every Service of the
// cluster for the life of the process.
func BenchmarkRecordRetained(b *testing.B) {
	const n = 10_000
	served := make([]*corev1.Service, n)
	for i := range served {
		s := servedService()
		s.Name, s.UID = fmt.Sprint("api-", i), types.UID(fmt.Sprintf("7d1c1f0e-46c2-4f55-9a41-%012x", i))
		s.Annotations[ccm.AnnotationPrivateIPIDs] = fmt.Sprintf("bd66e0e0-2e8b-4c59-817f-%012x", i)
		served[i] = s
	}
	kept := make([]any, n)
	var retained float64
	for b.Loop() {
		clear(kept)
		before := liveHeap()
		for i, s := range served {
			kept[i], _ = RecordService(s)
		}
		retained = float64(liveHeap()-before) / n
	}
	runtime.KeepAlive(kept)
	b.ReportMetric(retained, "retained-B/service")
}

// liveHeap is the heap still reachable, garbage collected.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
