package sweeper

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
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
		{"applied", ours, map[string]attachment{id: {address: addr, resource: onLB, pool: unique.Make("dc-link"), ours: true}},
			"Reserved", "Applied", metav1.ConditionTrue, metav1.ConditionTrue, "IPAM IP " + id + " (172.16.35.7) in pool dc-link"},
		{"not attached: a CCM older than v0.36.0", ours, map[string]attachment{id: {address: addr, pool: unique.Make("dc-link"), ours: true}},
			"Reserved", "NotAttached", metav1.ConditionTrue, metav1.ConditionFalse, "v0.36.0"},
		{"gone from IPAM", ours, map[string]attachment{},
			"GoneFromIPAM", "GoneFromIPAM", metav1.ConditionFalse, metav1.ConditionFalse, "released or deleted out of band"},
		{"booked for another Service", ours, map[string]attachment{id: {address: addr, resource: onLB, pool: unique.Make("dc-link"), bookedFor: &types.NamespacedName{Namespace: "web", Name: "other"}, ours: true}},
			"BookedForAnother", "Applied", metav1.ConditionFalse, metav1.ConditionTrue, "booked for web/other"},
		{"no Load Balancer yet", map[string]string{ccm.AnnotationPrivateIPIDs: id, request.AnnotationAddresses: addr.String()}, map[string]attachment{id: {address: addr, pool: unique.Make("dc-link"), ours: true}},
			"Reserved", "LoadBalancerPending", metav1.ConditionTrue, metav1.ConditionFalse, "not made"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _ := conditions([]watched{svc(c.ann)}, c.listed, map[string]bool{})
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
			again, _ := conditions([]watched{svc(c.ann, got[0].Conditions...)}, c.listed, map[string]bool{})
			if again[0].Digest != servicecache.ConditionsDigest(again[0].Conditions) {
				t.Error("the Service carries its conditions and the digests differ: every cycle would write them")
			}
		})
	}
	// Claims not read: an ID missing from the listing cannot be told, and
	// the Service keeps what it has.
	if got, unknown := conditions([]watched{svc(ours)}, map[string]attachment{}, nil); len(got) != 0 || !unknown[key] {
		t.Errorf("conditions %+v, unknown %v with the claims unread, want none and the Service kept", got, unknown)
	}
	// IDs written by hand, not admitted by scw-lb-ipam: nothing of ours
	// to say (an ID missing from this cluster's listing is not gone).
	if got, _ := conditions([]watched{svc(map[string]string{ccm.AnnotationPrivateIPIDs: id})}, map[string]attachment{}, map[string]bool{}); len(got) != 0 {
		t.Errorf("conditions %+v on a Service scw-lb-ipam did not admit, want none", got)
	}
}

// recorder is a Publisher that keeps the last snapshot.
type recorder struct{ last *view.Snapshot }

func (r *recorder) Reset() {}
func (r *recorder) Publish(_ context.Context, snap *view.Snapshot) (view.Writes, error) {
	r.last = snap
	return view.Writes{}, nil
}

func (r *recorder) reservation(id string) (view.Reservation, bool) {
	for _, res := range r.last.Reservations {
		if res.ID == id {
			return res, true
		}
	}
	return view.Reservation{}, false
}

// TestCycleView: the cycle shows a reservation Live, then Retained with
// its release time, then not at all once released; and removes the
// conditions of a Service that no longer references IDs.
func TestCycleView(t *testing.T) {
	w := newWorld(t)
	rec := &recorder{}
	s := w.sweeper(func(o *Options) { o.View = rec })
	r := w.book("dc-link", "payments", "api")
	svc := w.Live("payments", "api", r.ID)
	w.sweep(s)
	res, ok := rec.reservation(r.ID)
	if !ok || res.Namespace != "payments" || res.Status.State != view.StateLive || res.Status.Pool != "dc-link" || res.Status.Service != "api" || res.Status.ReleaseAt != nil {
		t.Fatalf("a live reservation shows as %+v (found %v)", res, ok)
	}
	w.Remove(svc)
	w.sweep(s)
	res, _ = rec.reservation(r.ID)
	if res.Status.State != view.StateRetained || res.Status.ReleaseAt == nil || !res.Status.ReleaseAt.Time.Equal(w.Entry(r.ID).ReleaseAt) {
		t.Fatalf("a retained reservation shows as %+v, want Retained until %s", res, w.Entry(r.ID).ReleaseAt)
	}
	w.Clock.Step(25 * time.Hour)
	w.sweep(s)
	if _, ok := rec.reservation(r.ID); ok || w.Exists(r.ID) {
		t.Fatalf("released (%v), still shown (%v)", !w.Exists(r.ID), ok)
	}

	// A Service that carries our conditions but no IDs any more.
	plain := fixtures.Service("payments", "was-reserved", nil)
	plain.Status.Conditions = []metav1.Condition{{Type: view.ConditionReserved, Status: metav1.ConditionTrue, Reason: "Reserved"}}
	if err := w.Kube.Create(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	w.sweep(s)
	var found bool
	for _, sc := range rec.last.Services {
		if sc.Name == "was-reserved" {
			found = true
			if len(sc.Conditions) != 0 || sc.Digest == 0 {
				t.Errorf("conditions to write %+v (digest %x), want none over the ones it carries", sc.Conditions, sc.Digest)
			}
		}
	}
	if !found {
		t.Error("the conditions of a Service that references no IDs any more are not removed")
	}
}
