package ccm

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lb(ann map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "api", Annotations: ann},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}, {Port: 80}}},
	}
}

func TestReferencedIDsOfLiveServices(t *testing.T) {
	svc := lb(map[string]string{AnnotationPrivateIPIDs: " a, ,b "})
	if got := ReferencedIDs(svc); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ReferencedIDs = %q, want [a b]", got)
	}
	deleting := svc.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	cluster := svc.DeepCopy()
	cluster.Spec.Type = corev1.ServiceTypeClusterIP
	for name, s := range map[string]*corev1.Service{"terminating": deleting, "ClusterIP": cluster} {
		if Live(s) {
			t.Errorf("%s Service counted as live", name)
		}
	}
	if ReferencedIDs(lb(nil)) != nil {
		t.Error("IDs from a Service without the annotation")
	}
}

func TestHasLoadBalancer(t *testing.T) {
	withIngress := lb(nil)
	withIngress.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.9"}}
	withFinalizer := lb(nil)
	withFinalizer.Finalizers = []string{FinalizerLoadBalancerCleanup}
	for name, tt := range map[string]struct {
		svc  *corev1.Service
		want bool
	}{
		"nothing yet":    {lb(nil), false},
		"ingress":        {withIngress, true},
		"LB ID":          {lb(map[string]string{AnnotationLoadBalancerID: "fr-par-1/x"}), true},
		"the finalizer":  {withFinalizer, true},
		"our IDs only":   {lb(map[string]string{AnnotationPrivateIPIDs: "a"}), false},
		"another marker": {lb(map[string]string{"example.com/lb": "x"}), false},
	} {
		if got := HasLoadBalancer(tt.svc); got != tt.want {
			t.Errorf("%s: HasLoadBalancer = %v, want %v", name, got, tt.want)
		}
	}
}

func TestOnlyCCMChanges(t *testing.T) {
	old := lb(map[string]string{"scw-lb-ipam.io/pool": "dc-link"})
	old.ResourceVersion = "1"
	edit := func(f func(*corev1.Service)) *corev1.Service {
		s := old.DeepCopy()
		s.ResourceVersion = "2"
		f(s)
		return s
	}
	for name, tt := range map[string]struct {
		svc  *corev1.Service
		want bool
	}{
		"finalizer": {edit(func(s *corev1.Service) { s.Finalizers = []string{FinalizerLoadBalancerCleanup} }), true},
		"LB ID":     {edit(func(s *corev1.Service) { s.Annotations[AnnotationLoadBalancerID] = "fr-par-1/x" }), true},
		"status": {edit(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.9"}}
		}), true},
		"resourceVersion only": {edit(func(*corev1.Service) {}), false},
		"a user's annotation":  {edit(func(s *corev1.Service) { s.Annotations["scw-lb-ipam.io/pool"] = "general" }), false},
		"LB ID and the pool": {edit(func(s *corev1.Service) {
			s.Annotations[AnnotationLoadBalancerID] = "fr-par-1/x"
			s.Annotations["scw-lb-ipam.io/pool"] = "general"
		}), false},
	} {
		if got := OnlyCCMChanges(old, tt.svc); got != tt.want {
			t.Errorf("%s: OnlyCCMChanges = %v, want %v", name, got, tt.want)
		}
	}
}

func TestLoadBalancerIDForms(t *testing.T) {
	for in, want := range map[string]string{
		"fr-par-1/8A7FF36C-7E00-441F-BFDA-B6BDCB8ECC5F": "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f",
		"fr-par/8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f":   "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f",
		"8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f":          "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f",
		"":                                              "",
	} {
		if got := LoadBalancerID(lb(map[string]string{AnnotationLoadBalancerID: in})); got != want {
			t.Errorf("LoadBalancerID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFlag: the CCM's boolean annotations read as the CCM reads them
// (strconv.ParseBool), in one place.
func TestFlag(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "True": true, "TRUE": true, "1": true, "t": true, "false": false, "0": false, "": false, "yes": false, " true": false} {
		if got := Private(Of(map[string]string{AnnotationPrivate: v})); got != want {
			t.Errorf("private %q: %v, want %v", v, got, want)
		}
	}
	if Private(Of(nil)) {
		t.Error("absent: private")
	}
	for _, tt := range []struct {
		ann  map[string]string
		want bool
	}{
		{map[string]string{AnnotationPrivate: "1"}, true},
		{map[string]string{AnnotationPrivate: "true", AnnotationUseHostname: "True"}, false},
		{map[string]string{AnnotationPrivate: "true", AnnotationUseHostname: "nope"}, true},
		{map[string]string{}, false},
	} {
		if got := StatusListsPrivateIPs(Of(tt.ann)); got != tt.want {
			t.Errorf("%v: status lists private IPs %v, want %v", tt.ann, got, tt.want)
		}
	}
}
