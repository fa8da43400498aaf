package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	lbapi "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestPreviousLifesLoadBalancerIDLeaks is what the chaos run's leak was,
// on the real CCM: a Service whose scw-loadbalancer-id names the Load
// Balancer of the previous Service of its name. The CCM writes that ID
// itself when a copy of the previous Service without the ID (one a replace
// had stripped of it) is looked up by name after the delete and re-create:
// annotateAndPatch patches by name, with no UID precondition, and the new
// Service gets it. The chaos run did so from a new leader's first pass over
// its Services, late; this test writes the same patch itself, then lets
// the CCM go on. From then on the CCM syncs the previous Load Balancer, not
// the Service's own, and the delete finds a Load
// Balancer not named for this Service ("was renamed, not removing"),
// removes the finalizer and leaves the Service's own Load Balancer, with
// its reserved IP attached, for ever (in the chaos run, a move to another
// pool in between got no detach either). The webhook keeps the ID a replace
// drops (TestReplaceKeepsTheCCMsLoadBalancerID), which takes the first
// step away.
func TestPreviousLifesLoadBalancerIDLeaks(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		const ns, name = "payments", "previous-life"
		lbOf := func() string {
			_, id, _ := strings.Cut(get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID], "/")
			return id
		}
		// The two lives in two pools: the second books its own IP, not the
		// first's, which the previous Load Balancer holds while it is
		// deleted. Public Load Balancers, as the chaos run's are.
		if err := s.Kube.Create(ctx, fixtures.Service(ns, name, map[string]string{request.AnnotationPool: "general"})); err != nil {
			t.Fatal(err)
		}
		attachedTo(t, ns, name, get(t, ns, name).Annotations[ccm.AnnotationPrivateIPIDs])
		previous := lbOf()
		// Real Scaleway answers to_delete for about 30 s after DeleteLB.
		release, err := s.Emu.HoldLBDeletion(previous)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		del(t, get(t, ns, name))

		if err := s.Kube.Create(ctx, fixtures.Service(ns, name, map[string]string{request.AnnotationPool: "dc-link"})); err != nil {
			t.Fatal(err)
		}
		x := get(t, ns, name).Annotations[ccm.AnnotationPrivateIPIDs]
		attachedTo(t, ns, name, x)
		own := lbOf()
		// The stale copy's patch: the previous Load Balancer's ID, by name.
		if err := s.Kube.Patch(ctx, get(t, ns, name), client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+ccm.AnnotationLoadBalancerID+`":"fr-par-1/`+previous+`"}}}`))); err != nil {
			t.Fatal(err)
		}
		since := len(s.Emu.LBAudit(own))
		time.Sleep(3 * time.Second) // the CCM's sync of the patched Service
		if err := s.Kube.Delete(ctx, get(t, ns, name)); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, 60*time.Second, poll, ns+"/"+name+" gone", func() bool {
			return apierrors.IsNotFound(s.Kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{}))
		})
		if lines := s.CCM.Lines("load balancer for service " + ns + "/" + name + " was renamed, not removing"); len(lines) == 0 {
			t.Errorf("the CCM did not log why it let %s/%s go", ns, name)
		}
		if after := s.Emu.LBAudit(own)[since:]; len(after) > 0 {
			t.Errorf("the CCM changed the Service's own Load Balancer after the patch: %+v", after)
		}
		ip, ok := s.Emu.IP(x)
		if !ok || ip.Resource == nil || ip.Resource.ID != own {
			t.Fatalf("want %s still attached to the leaked Load Balancer %s, got %+v", x, own, ip)
		}
		// Clean up as an operator would (docs/troubleshooting.md): delete
		// the leaked Load Balancer; the sweeper releases the IP later.
		release()
		console, err := s.Console()
		if err != nil {
			t.Fatal(err)
		}
		if err := lbapi.NewZonedAPI(console).DeleteLB(&lbapi.ZonedAPIDeleteLBRequest{LBID: own}); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, 60*time.Second, poll, x+" detached", func() bool {
			ip, ok := s.Emu.IP(x)
			return !ok || ip.Resource == nil
		})
	})
}
