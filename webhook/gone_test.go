package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestRecoverFromAnIDGoneFromIPAM proves the recoveries the sweeper's
// gone_from_ipam Event and the runbook's name, with the ID deleted out
// of band: re-creating the Service with its old address pinned books that
// address anew under a new ID, and asking for another address under
// allow-ip-change books that one. Neither removing the dead ID from
// private-ip-ids nor pinning the recorded address on the live Service is
// one: the webhook reads both as a re-apply and keeps the dead ID.
func TestRecoverFromAnIDGoneFromIPAM(t *testing.T) {
	setup := func(t *testing.T) (*harness, *corev1.Service, string) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		dead := live.Annotations[ccm.AnnotationPrivateIPIDs]
		if err := h.Cloud.ReleaseIP(context.Background(), dead); err != nil {
			t.Fatal(err)
		}
		if err := h.alloc.Inventory().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		return h, live, dead
	}
	newID := func(t *testing.T, h *harness, svc *corev1.Service, r *admissionv1.AdmissionResponse, dead, addr string) string {
		t.Helper()
		if !r.Allowed {
			t.Fatalf("denied: %s", r.Result.Message)
		}
		out := svc.DeepCopy()
		for _, op := range patchOps(t, r) {
			if op.Path == "/metadata/annotations/service.beta.kubernetes.io~1scw-loadbalancer-private-ip-ids" {
				out.Annotations[ccm.AnnotationPrivateIPIDs] = op.Value.(string)
			}
			if op.Path == "/metadata/annotations/scw-lb-ipam.io~1addresses" {
				out.Annotations[request.AnnotationAddresses] = op.Value.(string)
			}
		}
		id := out.Annotations[ccm.AnnotationPrivateIPIDs]
		if id == "" || id == dead {
			t.Fatalf("private-ip-ids %q: want a new ID in place of %s", id, dead)
		}
		if ip, ok := h.Srv.IP(id); !ok || ip.Address.IP.String() != addr {
			t.Fatalf("IP %s: %+v (exists %v), want it booked at %s", id, ip.Address, ok, addr)
		}
		if got := out.Annotations[request.AnnotationAddresses]; got != addr {
			t.Fatalf("addresses %q, want %s", got, addr)
		}
		return id
	}

	t.Run("pinning the old address under allow-ip-change is the same request", func(t *testing.T) {
		// The address pinned is the one recorded: the webhook reads it as a
		// re-apply and keeps the dead ID, so the Event must not advise it.
		h, live, dead := setup(t)
		next := live.DeepCopy()
		next.Annotations[request.AnnotationAllowIPChange] = "true"
		next.Annotations[request.AnnotationAddress] = "172.16.35.200"
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		if !r.Allowed || len(r.Patch) != 0 || next.Annotations[ccm.AnnotationPrivateIPIDs] != dead {
			t.Fatalf("allowed %v, patch %s: want the update let through unchanged, keeping %s", r.Allowed, r.Patch, dead)
		}
	})

	t.Run("another address under allow-ip-change books anew", func(t *testing.T) {
		h, live, dead := setup(t)
		next := live.DeepCopy()
		next.Annotations[request.AnnotationAllowIPChange] = "true"
		next.Annotations[request.AnnotationAddress] = "172.16.35.202"
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		newID(t, h, next, r, dead, "172.16.35.202")
	})

	t.Run("re-creating the Service books anew", func(t *testing.T) {
		h, live, dead := setup(t)
		if err := h.Kube.Delete(context.Background(), live); err != nil {
			t.Fatal(err)
		}
		svc := fixtures.PrivateService("payments", "api", map[string]string{request.AnnotationPool: "dc-link", request.AnnotationAddress: "172.16.35.200"})
		r, _ := h.send(review(admissionv1.Create, svc, nil, false))
		newID(t, h, svc, r, dead, "172.16.35.200")
	})

	t.Run("removing the dead ID is restored, not a recovery", func(t *testing.T) {
		h, live, dead := setup(t)
		next := live.DeepCopy()
		next.Annotations[request.AnnotationAllowIPChange] = "true"
		delete(next.Annotations, ccm.AnnotationPrivateIPIDs)
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		if !r.Allowed {
			t.Fatalf("denied: %s", r.Result.Message)
		}
		restored := false
		for _, op := range patchOps(t, r) {
			if op.Path == "/metadata/annotations/service.beta.kubernetes.io~1scw-loadbalancer-private-ip-ids" && op.Value == dead {
				restored = true
			}
		}
		if !restored {
			t.Fatalf("patch %s: the dead ID %s was not put back; the runbook's advice against this edit is then stale", r.Patch, dead)
		}
	})
}
