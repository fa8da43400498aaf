package cloudcontroller

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
)

// lateDeletion makes the emulator keep a deleted Load Balancer to_delete
// for d.
func lateDeletion(d time.Duration) func(*scalewaytest.Options) {
	return func(o *scalewaytest.Options) { o.LBDeleteDelay = d }
}

// reservedLB is a private LoadBalancer Service of namespace ns on the
// nodes' and the pool's networks, with reserved IP id on the pool's.
func (w *world) reservedLB(name string, uid types.UID, id string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, Annotations: map[string]string{
			annotationPrivate: "true", annotationPNIDs: w.nodes.ID + "," + w.pool.ID, annotationPrivateIPIDs: id,
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
}

// lbNamed is the emulator's Load Balancer named name (a Service's UID).
func (w *world) lbNamed(name string) (scalewaytest.LB, bool) {
	for _, lb := range w.emu.LBs() {
		if lb.Name == name {
			return lb, true
		}
	}
	return scalewaytest.LB{}, false
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

// TestFinalizerGoesOnceDeleteLBIsAccepted: as the CCM, the teardown calls
// DeleteLB and drops the finalizer at once, without waiting for the Load
// Balancer to go: the Service is gone while its Load Balancer is still
// to_delete with the reserved IP attached. The passes after it leave that
// Load Balancer to go by itself.
func TestFinalizerGoesOnceDeleteLBIsAccepted(t *testing.T) {
	w := newWorld(t, lateDeletion(time.Hour))
	ctx := context.Background()
	x := w.servedAPI(t)
	from := len(w.emu.Requests())
	w.deleteAndTearDown(t, "api")
	if calls, want := w.ops(from), []string{"GetLB", "DeleteLB"}; !slices.Equal(calls, want) {
		t.Fatalf("teardown calls %v, want %v", calls, want)
	}
	lb, ok := w.lbNamed("uid-old")
	if !ok || lb.Status != "to_delete" || lb.PrivateNetworks[w.pool.ID] != x {
		t.Fatalf("the Load Balancer after the teardown: %+v (found %v), want to_delete holding %s", lb, ok, x)
	}
	// The Service is gone: the next pass looks for orphaned Load
	// Balancers, and deletes none that is already being deleted.
	from = len(w.emu.Requests())
	w.ccm.Sync(ctx)
	if calls := w.ops(from); !slices.Equal(calls, []string{"ListLBs"}) {
		t.Fatalf("calls after the Service went: %v, want a ListLBs only", calls)
	}
}

// TestReCreateAttachesOnceThePreviousLBLetsGo: a Service re-created while
// its previous incarnation's Load Balancer is to_delete and still holds the
// reserved IP gets a Load Balancer of its own, whose attach of that IP is
// refused; the stand-in retries with the service controller's backoff (5 s,
// then 10 s; a new version of the Service starts again at 5 s) and attaches
// the IP once the previous Load Balancer is gone.
func TestReCreateAttachesOnceThePreviousLBLetsGo(t *testing.T) {
	w := newWorld(t, lateDeletion(2*time.Second))
	clk := clocktesting.NewFakeClock(time.Now())
	w.ccm.o.Clock = clk
	var mu sync.Mutex
	var logs []string
	w.ccm.o.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, format)
	}
	ctx := context.Background()
	x := w.servedAPI(t)
	w.deleteAndTearDown(t, "api")
	if err := w.kube.Create(ctx, w.reservedLB("api", "uid-new", x)); err != nil {
		t.Fatal(err)
	}

	// attempts runs a pass and tells whether it tried to attach.
	attempts := func() bool {
		t.Helper()
		from := len(w.emu.Requests())
		w.ccm.Sync(ctx)
		return slices.Contains(w.ops(from), "AttachPrivateNetwork")
	}
	// The first pass creates the Load Balancer and fails on X; its own
	// scw-loadbalancer-id makes a new version, tried at once, which fails
	// too: from then on the backoff of that version.
	for pass := range 2 {
		if !attempts() {
			t.Fatalf("pass %d of the new Service did not try to attach", pass+1)
		}
	}
	if lb, ok := w.lbNamed("uid-new"); !ok || lb.PrivateNetworks[w.pool.ID] == x {
		t.Fatalf("new Load Balancer %+v (found %v): X must still be the old one's", lb, ok)
	}
	for _, step := range []struct {
		advance time.Duration
		tries   bool
	}{
		{0, false}, {4900 * time.Millisecond, false}, {100 * time.Millisecond, true}, // 5 s
		{9900 * time.Millisecond, false}, {100 * time.Millisecond, true}, // then 10 s
	} {
		clk.Step(step.advance)
		if got := attempts(); got != step.tries {
			t.Fatalf("after %s more: tried %v, want %v", step.advance, got, step.tries)
		}
	}
	// A new version of the Service is tried at once, and its backoff
	// starts again at 5 s.
	svc := w.get(t, "api")
	svc.Annotations["example.com/owner"] = "payments"
	if err := w.kube.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if !attempts() {
		t.Fatal("a new version waited for the previous version's backoff")
	}
	w.waitGone(t, "uid-old")
	clk.Step(4900 * time.Millisecond)
	if attempts() {
		t.Fatal("retried before 5 s")
	}
	clk.Step(100 * time.Millisecond)
	if !attempts() {
		t.Fatal("no retry after 5 s")
	}
	lb, _ := w.lbNamed("uid-new")
	if lb.PrivateNetworks[w.pool.ID] != x {
		t.Fatalf("new Load Balancer %+v, want X on the pool's network once the old one is gone", lb)
	}
	if ip, _ := w.emu.IP(x); ip.Resource == nil || ip.Resource.ID != lb.ID {
		t.Fatalf("X attached to %+v, want %s", ip.Resource, lb.ID)
	}
	if got := w.get(t, "api"); len(got.Status.LoadBalancer.Ingress) == 0 {
		t.Fatal("no status after the successful sync")
	}
	// Success ends the backoff: nothing left to retry.
	clk.Step(time.Hour)
	from := len(w.emu.Requests())
	w.ccm.Sync(ctx)
	if calls := w.ops(from); len(calls) != 0 {
		t.Fatalf("a pass after the success called %v", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "retrying in") }) {
		t.Fatalf("no failed sync logged: %q", logs)
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

// servedAPI books a reservation and lets the stand-in serve Service api
// (uid-old) with it; it returns the IPAM ID.
func (w *world) servedAPI(t *testing.T) string {
	t.Helper()
	x, err := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.10"), []string{"scw-lb-ipam"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.kube.Create(context.Background(), w.reservedLB("api", "uid-old", x)); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(context.Background())
	return x
}
