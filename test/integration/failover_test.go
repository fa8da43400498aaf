package integration

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestLifeWhileTheCCMIsDown is the short life of the chaos run that left a
// Load Balancer behind (seed 20261128, 1,500 operations), made
// deterministic: created in dc-link and attached, then, while the CCM is
// down (its leader killed), moved to general with allow-ip-change,
// replaced with its manifest (kubectl replace: the CCM's
// scw-loadbalancer-id goes with the other annotations), moved back and
// deleted. The replace keeps the CCM's Load Balancer ID (the webhook puts
// it back). Once a CCM runs again, the Service must go with its Load
// Balancer, and the reserved IP be attached to nothing. Its Load Balancer
// is public, as the chaos run's are.
func TestLifeWhileTheCCMIsDown(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		const ns, name = "payments", "short-life"
		manifest := map[string]string{request.AnnotationPool: "dc-link"}
		if err := s.Kube.Create(ctx, fixtures.Service(ns, name, manifest)); err != nil {
			t.Fatal(err)
		}
		x := get(t, ns, name).Annotations[ccm.AnnotationPrivateIPIDs]
		attachedTo(t, ns, name, x)
		_, lb, _ := strings.Cut(get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID], "/")

		down := make(chan error, 1)
		go func() { down <- s.CCM.Kill(0, 12*time.Second) }()
		time.Sleep(500 * time.Millisecond) // the kill lands first
		move := func(pool string) {
			t.Helper()
			if err := update(s.Kube, ns, name, func(svc *corev1.Service) {
				svc.Annotations[request.AnnotationPool] = pool
				svc.Annotations[request.AnnotationAllowIPChange] = "true"
			}); err != nil {
				t.Fatalf("moving to %s: %v", pool, err)
			}
		}
		move("general")
		// The manifest as the move left it: its pool, with allow-ip-change.
		moved := map[string]string{request.AnnotationPool: "general", request.AnnotationAllowIPChange: "true"}
		if err := update(s.Kube, ns, name, func(svc *corev1.Service) {
			svc.Annotations = maps.Clone(moved)
		}); err != nil {
			t.Fatalf("replace: %v", err)
		}
		// The webhook puts back the CCM's ID the replace dropped: the CCM
		// finds its Load Balancer by ID, never patches one by name.
		if got := get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID]; !strings.HasSuffix(got, "/"+lb) {
			t.Fatalf("after the replace, scw-loadbalancer-id is %q, want the Load Balancer %s", got, lb)
		}
		move("dc-link")
		if err := s.Kube.Delete(ctx, get(t, ns, name)); err != nil {
			t.Fatal(err)
		}
		if err := <-down; err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, 90*time.Second, poll, ns+"/"+name+" gone", func() bool {
			return apierrors.IsNotFound(s.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{}))
		})
		fixtures.Eventually(t, 60*time.Second, poll, "Load Balancer "+lb+" deleted and "+x+" detached", func() bool {
			for _, l := range s.Emu.LBs() {
				if l.ID == lb {
					return false
				}
			}
			ip, ok := s.Emu.IP(x)
			return !ok || ip.Resource == nil
		})
	})
}
