package oldccm

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// lateDeletion makes the emulator keep a deleted Load Balancer to_delete
// for d.
func lateDeletion(d time.Duration) func(*emulator.Options) {
	return func(o *emulator.Options) { o.LBDeleteDelay = d }
}

// lbNamed is the emulator's Load Balancer named name (a Service's UID).
func (w *world) lbNamed(name string) (emulator.LB, bool) {
	for _, lb := range w.emu.LBs() {
		if lb.Name == name {
			return lb, true
		}
	}
	return emulator.LB{}, false
}

// waitGone waits (real time: the emulator's deletions run on it) until the
// Load Balancer named name is gone.
func (w *world) waitGone(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := w.lbNamed(name); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Load Balancer %s still there after 10s", name)
		}
	}
}

// deleteAndTearDown deletes Service name and runs the pass that tears it
// down; the finalizer must be gone with it.
func (w *world) deleteAndTearDown(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := w.kube.Delete(ctx, w.get(t, name)); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	if err := w.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &corev1.Service{}); err == nil {
		t.Fatalf("Service %s is still there after its teardown", name)
	}
}

// TestBackoffDoublesUpToTheCap: the service controller's delays, 5 s
// doubling to 300 s, for failures of one version; another version starts
// again at 5 s.
func TestBackoffDoublesUpToTheCap(t *testing.T) {
	w := newWorld(t)
	clk := clocktesting.NewFakeClock(time.Now())
	w.ccm.o.Clock = clk
	var got []time.Duration
	for range 9 {
		got = append(got, w.ccm.backoff("uid-1", "v1"))
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 300, 300, 300}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	if r := w.ccm.retries["uid-1"]; !r.next.Equal(clk.Now().Add(300 * time.Second)) {
		t.Fatalf("next try at %s, want 300 s from now", r.next)
	}
	if d := w.ccm.backoff("uid-1", "v2"); d != 5*time.Second {
		t.Fatalf("first failure of a new version: %s, want 5s", d)
	}
}

// TestAnnotationOfALoadBalancerBeingDeleted: a Service re-created with its
// predecessor's scw-loadbalancer-id (kubectl replace of an exported object)
// finds that Load Balancer to_delete: as the CCM, the sync fails (not
// ready) and creates nothing; once it is gone, a retry creates the
// Service's own.
func TestAnnotationOfALoadBalancerBeingDeleted(t *testing.T) {
	w := newWorld(t, lateDeletion(500*time.Millisecond))
	clk := clocktesting.NewFakeClock(time.Now())
	w.ccm.o.Clock = clk
	ctx := context.Background()
	if err := w.kube.Create(ctx, privateLB("api", "uid-old")); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	lbID := w.get(t, "api").Annotations[annotationLoadBalancerID]
	if lbID == "" {
		t.Fatal("no scw-loadbalancer-id")
	}
	w.deleteAndTearDown(t, "api")
	again := privateLB("api", "uid-new")
	again.Annotations[annotationLoadBalancerID] = lbID
	if err := w.kube.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	from := len(w.emu.Requests())
	w.ccm.Sync(ctx)
	if calls := w.ops(from); slices.Contains(calls, "CreateLB") || slices.Contains(calls, "AttachPrivateNetwork") {
		t.Fatalf("acted on a Load Balancer being deleted: %v", calls)
	}
	w.waitGone(t, "uid-old")
	clk.Step(minRetryDelay)
	w.ccm.Sync(ctx)
	lb, ok := w.lbNamed("uid-new")
	if !ok || len(lb.PrivateNetworks) != 1 {
		t.Fatalf("the re-created Service's Load Balancer: %+v (found %v)", lb, ok)
	}
	if got := w.get(t, "api").Annotations[annotationLoadBalancerID]; got != "fr-par-1/"+lb.ID {
		t.Fatalf("scw-loadbalancer-id %q, want its own Load Balancer %s", got, lb.ID)
	}
}
