package sweeper

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// TestServiceConditions: Reserved and Applied as the cycle's listing and
// the monitor's classification say, and no write when they are what the
// Service carries.
func TestServiceConditions(t *testing.T) {
	const id, lb = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	addr := netip.MustParseAddr("172.16.35.7")
	svc := func(ann map[string]string, conds ...metav1.Condition) watched {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "api", UID: "u1", Annotations: ann},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{Conditions: conds}}
		rec := servicecache.NewRecord(s)
		return watched{svc: rec, ids: rec.ReferencedIDs()}
	}
	ours := map[string]string{ccm.AnnotationPrivateIPIDs: id, request.AnnotationAddresses: addr.String(), ccm.AnnotationLoadBalancerID: "fr-par-1/" + lb}
	onLB := &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: lb}
	key := types.NamespacedName{Namespace: "web", Name: "api"}
	for _, c := range []struct {
		name                    string
		ann                     map[string]string
		listed                  map[string]attachment
		reserved, applied       string // reasons
		reservedOK, appliedWant metav1.ConditionStatus
		message                 string
	}{
		{"applied", ours, map[string]attachment{id: {address: addr, resource: onLB, pool: "dc-link", service: key, ours: true}},
			"Reserved", "Applied", metav1.ConditionTrue, metav1.ConditionTrue, "IPAM IP " + id + " (172.16.35.7) in pool dc-link"},
		{"not attached: a CCM older than v0.36.0", ours, map[string]attachment{id: {address: addr, pool: "dc-link", service: key, ours: true}},
			"Reserved", "NotAttached", metav1.ConditionTrue, metav1.ConditionFalse, "v0.36.0"},
		{"gone from IPAM", ours, map[string]attachment{},
			"GoneFromIPAM", "GoneFromIPAM", metav1.ConditionFalse, metav1.ConditionFalse, "released or deleted out of band"},
		{"booked for another Service", ours, map[string]attachment{id: {address: addr, resource: onLB, pool: "dc-link", service: types.NamespacedName{Namespace: "web", Name: "other"}, ours: true}},
			"BookedForAnother", "Applied", metav1.ConditionFalse, metav1.ConditionTrue, "booked for web/other"},
		{"no Load Balancer yet", map[string]string{ccm.AnnotationPrivateIPIDs: id, request.AnnotationAddresses: addr.String()}, map[string]attachment{id: {address: addr, pool: "dc-link", service: key, ours: true}},
			"Reserved", "LoadBalancerPending", metav1.ConditionTrue, metav1.ConditionFalse, "not made"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := conditions([]watched{svc(c.ann)}, c.listed, map[string]bool{})
			if len(got) != 1 || len(got[0].Conditions) != 2 {
				t.Fatalf("conditions %+v, want Reserved and Applied", got)
			}
			r, a := got[0].Conditions[0], got[0].Conditions[1]
			if r.Type != view.ConditionReserved || r.Reason != c.reserved || r.Status != c.reservedOK {
				t.Errorf("Reserved %+v, want %s %s", r, c.reservedOK, c.reserved)
			}
			if a.Type != view.ConditionApplied || a.Reason != c.applied || a.Status != c.appliedWant {
				t.Errorf("Applied %+v, want %s %s", a, c.appliedWant, c.applied)
			}
			if !strings.Contains(r.Message+" "+a.Message, c.message) {
				t.Errorf("messages %q and %q do not say %q", r.Message, a.Message, c.message)
			}
			// Carried already: the digest matches, nothing to write.
			again := conditions([]watched{svc(c.ann, got[0].Conditions...)}, c.listed, map[string]bool{})
			if again[0].Digest != servicecache.ConditionsDigest(again[0].Conditions) {
				t.Error("the Service carries its conditions and the digests differ: every cycle would write them")
			}
		})
	}
	// Claims not read: an ID missing from the listing cannot be told, and
	// the Service keeps what it has.
	if got := conditions([]watched{svc(ours)}, map[string]attachment{}, nil); len(got) != 0 {
		t.Errorf("conditions %+v with the claims unread, want none", got)
	}
}
