package integration

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestRecreateWhileTerminating: helm --force (or an Argo CD
// replace) deletes a Service and creates it again at once. The CCM's
// finalizer keeps the old one Terminating with its IP X attached to the old
// Load Balancer; the client retries the create as kubectl and Helm do
// (AlreadyExists, and the webhook's 429 "still held" that client-go
// retries after its Retry-After). The new
// api ends with X, its new Load Balancer attached with X, and once the
// sweeper settled no other reservation for it remains.
func TestRecreateWhileTerminating(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		svc := fixtures.PrivateService("payments", "replaced", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		x := get(t, "payments", "replaced").Annotations[ccm.AnnotationPrivateIPIDs]
		attachedTo(t, "payments", "replaced", x)
		old := get(t, "payments", "replaced")
		// X is the reservation a live Service used.
		backfilled(t, old, x)
		replaceWhileTerminating(t, old, x, map[string]string{request.AnnotationPool: "dc-link"})
		// Whatever was booked on the way is reclaimed: only X is left.
		fixtures.Eventually(t, pendingGrace+15*time.Second, poll, "only X reserved for payments/replaced", func() bool {
			for _, ip := range s.Emu.IPs() {
				if e, ok := ipam.ParseEntry(ip.Tags); ok && e.Owns("it") && e.Service.String() == "payments/replaced" && ip.ID != x {
					return false
				}
			}
			return true
		})
	})
}

// replaceWhileTerminating deletes old, whose Load Balancer holds x, and
// creates it again at once with ann, retrying as kubectl and Helm do (on a
// 429 client-go itself retries after Retry-After): the new Service ends
// with x, attached to its own new Load Balancer.
func replaceWhileTerminating(t *testing.T, old *corev1.Service, x string, ann map[string]string) {
	t.Helper()
	ctx := context.Background()
	ns, name := old.Namespace, old.Name
	// The old Load Balancer lets X go only once the webhook has answered
	// the re-create: it stays to_delete, holding X, as a slow deletion at
	// Scaleway does; the CCM lets the Service go once DeleteLB is
	// accepted.
	_, oldLB, _ := strings.Cut(old.Annotations[ccm.AnnotationLoadBalancerID], "/")
	release, err := s.Emu.HoldLBDeletion(oldLB)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	del(t, old)
	if ip, _ := s.Emu.IP(x); ip.Resource == nil || ip.Resource.ID != oldLB {
		t.Fatalf("X after the deletion: attached to %+v, want the old Load Balancer %s", ip.Resource, oldLB)
	}
	// Any CREATE answered: this test is the only one creating now.
	answered, done := s.Creates(), make(chan struct{})
	defer close(done)
	go func() {
		defer release()
		for s.Creates() == answered {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	reasons := map[string]int{}
	start := time.Now()
	fixtures.Eventually(t, 30*time.Second, poll, "the re-create to succeed", func() bool {
		err := s.Kube.Create(ctx, fixtures.PrivateService(ns, name, ann))
		switch {
		case err == nil:
			return true
		case apierrors.IsAlreadyExists(err):
			reasons["AlreadyExists"]++
		case strings.Contains(err.Error(), "still held by the Load Balancer of the previous "+ns+"/"+name):
			reasons["still held"]++
		default:
			t.Fatalf("re-create: %v", err)
		}
		return false
	})
	t.Logf("re-created after %s; refusals seen by the client: %v", time.Since(start).Round(10*time.Millisecond), reasons)
	now := get(t, ns, name)
	t.Cleanup(func() { del(t, now) })
	if got := now.Annotations[ccm.AnnotationPrivateIPIDs]; got != x {
		t.Fatalf("re-created %s/%s got %s, want its previous %s", ns, name, got, x)
	}
	attachedTo(t, ns, name, x)
	if lb := get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID]; lb == old.Annotations[ccm.AnnotationLoadBalancerID] {
		t.Fatalf("the new Service is on the old Load Balancer %s", lb)
	}
}

// TestBringYourOwnRecreateWhileTerminating: the same replace with
// a bring-your-own IPAM ID: its claim names the Service, so the previous
// Load Balancer's hold is a retryable refusal, not "attached to lb_server".
func TestBringYourOwnRecreateWhileTerminating(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		id, err := s.Emu.AddIP(s.PNs["edge"].ID, netip.MustParseAddr("10.10.0.250"), []string{"reserved-by-terraform"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ann := map[string]string{request.AnnotationIPAMIDs: id}
		if err := s.Kube.Create(ctx, fixtures.PrivateService("payments", "byo-replaced", ann)); err != nil {
			t.Fatal(err)
		}
		attachedTo(t, "payments", "byo-replaced", id)
		replaceWhileTerminating(t, get(t, "payments", "byo-replaced"), id, ann)
	})
}

// TestRestoredManifestGetsItsOwnLoadBalancer: a Service saved with its
// CCM annotations (kubectl get -o yaml, a Velero restore) and created again
// while its previous Load Balancer is still being deleted. The webhook
// drops the restored scw-loadbalancer-id with a warning: the real CCM makes
// the new Service a Load Balancer of its own, attaches the reserved address
// to it, and deletes it with the Service, leaving no Load Balancer and the
// address detached. With the stale ID, the CCM's delete path answers "not
// found" for the Load Balancer it names and would let go of one it made.
func TestRestoredManifestGetsItsOwnLoadBalancer(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		const ns, name = "payments", "restored"
		if err := s.Kube.Create(ctx, fixtures.PrivateService(ns, name, map[string]string{request.AnnotationPool: "dc-link"})); err != nil {
			t.Fatal(err)
		}
		x := get(t, ns, name).Annotations[ccm.AnnotationPrivateIPIDs]
		attachedTo(t, ns, name, x)
		saved := get(t, ns, name)
		_, oldLB, _ := strings.Cut(saved.Annotations[ccm.AnnotationLoadBalancerID], "/")
		release, err := s.Emu.HoldLBDeletion(oldLB)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		del(t, saved)

		restored := fixtures.Service(ns, name, saved.Annotations)
		restored.Spec.Ports = saved.Spec.Ports
		c, warnings := clientWithWarnings(t)
		if err := c.Create(ctx, restored); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(warnings.List(), func(w string) bool { return strings.Contains(w, ccm.AnnotationLoadBalancerID+" is dropped") }) {
			t.Fatalf("no warning on the restored Load Balancer ID: %q", warnings.List())
		}
		if got := get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID]; strings.HasSuffix(got, oldLB) {
			t.Fatalf("the restored Service names its predecessor's Load Balancer %s", got)
		}
		release()
		attachedTo(t, ns, name, x)
		_, newLB, _ := strings.Cut(get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID], "/")
		if newLB == oldLB {
			t.Fatalf("the restored Service is served by its predecessor's Load Balancer %s", oldLB)
		}
		del(t, get(t, ns, name))
		fixtures.Eventually(t, 60*time.Second, poll, "no Load Balancer left and "+x+" detached", func() bool {
			for _, lb := range s.Emu.LBs() {
				if lb.ID == newLB || lb.ID == oldLB {
					return false
				}
			}
			ip, ok := s.Emu.IP(x)
			return ok && ip.Resource == nil
		})
	})
}
