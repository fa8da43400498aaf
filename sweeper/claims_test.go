package sweeper

import (
	"context"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// askedClaims is a claim store of one claim: it records what the cycle
// answers about it.
type askedClaims struct {
	id   string
	svc  types.NamespacedName
	kept []bool
}

func (c *askedClaims) Collect(_ context.Context, inUse func(string, types.NamespacedName) bool) (int, []string, error) {
	kept := inUse(c.id, c.svc)
	c.kept = append(c.kept, kept)
	if !kept {
		return 0, nil, nil
	}
	return 0, []string{c.id}, nil
}

// Finding 4, bring-your-own: helm uninstall --wait && helm install of a
// Service with its own IPAM ID. The sweeper must not collect the claim in
// the windows a re-create may fall into: while the old Service is
// Terminating behind the CCM's finalizer, and after it is gone while
// Scaleway still deletes its Load Balancer. Only then is the claim free.
func TestClaimKeptWhileTheServiceOrItsLoadBalancerRemains(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	id, err := w.Srv.AddIP(w.PNs["edge"].ID, netip.MustParseAddr("10.10.0.77"), []string{"reserved-by-terraform"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Srv.Attach(id, emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "uid-api"}); err != nil {
		t.Fatal(err)
	}
	api := types.NamespacedName{Namespace: "payments", Name: "api"}
	claims := &askedClaims{id: id, svc: api}
	s := w.sweeper(func(o *Options) { o.Claims = claims })

	svc := w.Live("payments", "api", id)
	svc.Finalizers = []string{ccm.FinalizerLoadBalancerCleanup}
	if err := w.Kube.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	w.sweep(s) // live
	w.Remove(svc)
	w.sweep(s) // Terminating: the CCM holds it
	if err := w.Kube.Get(ctx, api, svc); err != nil {
		t.Fatal(err)
	}
	svc.Finalizers = nil
	if err := w.Kube.Update(ctx, svc); err != nil { // the CCM lets go: gone
		t.Fatal(err)
	}
	w.sweep(s) // gone, its Load Balancer still being deleted
	if err := w.Srv.Detach(id); err != nil {
		t.Fatal(err)
	}
	w.sweep(s) // gone for good

	want := []bool{true, true, true, false}
	if len(claims.kept) != len(want) {
		t.Fatalf("asked %d times, want %d", len(claims.kept), len(want))
	}
	for i, step := range []string{"live", "Terminating", "gone, LB still holding the IP", "gone, IP detached"} {
		if claims.kept[i] != want[i] {
			t.Errorf("%s: claim kept = %v, want %v", step, claims.kept[i], want[i])
		}
	}
}
