package webhook

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// The chaos run's leak: a replace (kubectl replace, Argo CD's Replace=true)
// drops the CCM's scw-loadbalancer-id with the other annotations. The CCM
// then looks its Load Balancer up by name and patches the ID back by the
// Service's name alone, and a copy it read before a delete and re-create of
// that name writes the previous Load Balancer's ID onto the new Service
// (see droppedLoadBalancerID). The ID is put back whatever the UPDATE
// does; what the CCM itself removes, and an ID that is the user's, are left
// alone.
func TestReplaceKeepsTheCCMsLoadBalancerID(t *testing.T) {
	const lbID = "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa"
	// attached is a Service created with manifest, once the CCM made its
	// Load Balancer: its ID and finalizer on the object.
	attached := func(h *harness, manifest map[string]string) *corev1.Service {
		live := h.created(fixtures.PrivateService("payments", "api", manifest))
		live.Annotations[ccm.AnnotationLoadBalancerID] = lbID
		live.Finalizers = []string{ccm.FinalizerLoadBalancerCleanup}
		return live
	}
	replaced := func(live *corev1.Service, manifest map[string]string) *corev1.Service {
		next := live.DeepCopy()
		next.Annotations = maps.Clone(manifest)
		return next
	}
	manifest := ann(request.AnnotationPool, "dc-link", ccm.AnnotationPrivate, "true")
	for _, tc := range []struct {
		name string
		// edit makes the UPDATE from the live Service.
		edit func(live *corev1.Service) *corev1.Service
		want string // the ID after the UPDATE; "" when absent
	}{
		{"replaced with its manifest", func(live *corev1.Service) *corev1.Service { return replaced(live, manifest) }, lbID},
		{"replaced with a manifest that moves it (allow-ip-change)", func(live *corev1.Service) *corev1.Service {
			return replaced(live, ann(request.AnnotationPool, "general", ccm.AnnotationPrivate, "true", request.AnnotationAllowIPChange, "true"))
		}, lbID},
		{"re-applied: the ID stays, nothing to put back", func(live *corev1.Service) *corev1.Service { return reapplied(live, manifest) }, lbID},
		{"the CCM's own removal, the Service live (it re-creates its Load Balancer)", func(live *corev1.Service) *corev1.Service {
			next := live.DeepCopy()
			delete(next.Annotations, ccm.AnnotationLoadBalancerID)
			return next
		}, ""},
		{"the CCM's own removal, another webhook stamping a label on the way", func(live *corev1.Service) *corev1.Service {
			next := live.DeepCopy()
			delete(next.Annotations, ccm.AnnotationLoadBalancerID)
			next.Labels = map[string]string{"stamped-by": "another-webhook"}
			return next
		}, ""},
		{"Terminating: the CCM removes it on its way out", func(live *corev1.Service) *corev1.Service {
			next := replaced(live, manifest)
			next.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			return next
		}, ""},
		{"an externally managed Load Balancer's ID is the user's", func(live *corev1.Service) *corev1.Service {
			return replaced(live, ann(request.AnnotationPool, "dc-link", ccm.AnnotationPrivate, "true", ccm.AnnotationExternallyManaged, "true"))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			live := attached(h, manifest)
			next := tc.edit(live)
			for _, dryRun := range []bool{false, true} {
				r, _ := h.send(review(admissionv1.Update, next, live, dryRun))
				if !r.Allowed {
					t.Fatalf("dry run %v: denied: %s", dryRun, r.Result.Message)
				}
				got := fixtures.Patched(t, next, r.Patch)
				if id := got.Annotations[ccm.AnnotationLoadBalancerID]; id != tc.want {
					t.Fatalf("dry run %v: scw-loadbalancer-id after the UPDATE: %q, want %q", dryRun, id, tc.want)
				}
				told := slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, ccm.AnnotationLoadBalancerID+" (the CCM's") })
				if put := tc.want != "" && next.Annotations[ccm.AnnotationLoadBalancerID] == ""; told != put {
					t.Fatalf("dry run %v: warned of the ID put back: %v, want %v (%q)", dryRun, told, put, r.Warnings)
				}
				if tc.want != "" && !dryRun && got.Annotations[ccm.AnnotationPrivateIPIDs] == "" {
					t.Fatalf("the reservation's IDs are not on the Service: %v", got.Annotations)
				}
			}
		})
	}
}
