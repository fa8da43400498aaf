package cloudcontroller

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
)

// world is the emulator, a fake apiserver and the stand-in between them.
type world struct {
	emu         *scalewaytest.Server
	kube        client.Client
	ccm         *Controller
	nodes, pool scalewaytest.PrivateNetwork
}

// newWorld builds a world; opts adjust the emulator's options.
func newWorld(t *testing.T, opts ...func(*scalewaytest.Options)) *world {
	t.Helper()
	var o scalewaytest.Options
	for _, f := range opts {
		f(&o)
	}
	w := &world{emu: scalewaytest.NewTestServer(t, o)}
	var err error
	if w.nodes, err = w.emu.AddPrivateNetwork("nodes", "172.16.0.0/22"); err != nil {
		t.Fatal(err)
	}
	if w.pool, err = w.emu.AddPrivateNetwork("dc", "172.16.32.0/22"); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	w.kube = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Service{}).Build()
	w.ccm, err = New(Options{
		Kube: w.kube, ClusterPrivateNetworkID: w.nodes.ID,
		Scaleway: w.emu.ClientOptions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ops are the operations the stand-in called since request from, in order.
func (w *world) ops(from int) []string {
	var out []string
	for _, r := range w.emu.Requests()[from:] {
		if r.Op != scalewaytest.OpMetadata && strings.Contains(r.UserAgent, UserAgent) {
			out = append(out, string(r.Op))
		}
	}
	return out
}

// privateLB is a LoadBalancer Service of namespace ns on a private Load
// Balancer.
func privateLB(name string, uid types.UID) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, Annotations: map[string]string{annotationPrivate: "true"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
}

func (w *world) get(t *testing.T, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := w.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestLifecycleMakesTheCCMsCalls: a private Service with a reserved IP on
// the pool's network gets the finalizer, a Load Balancer named after its
// UID, the scw-loadbalancer-id annotation, both networks attached (the
// reserved IP on the pool's, DHCP on the nodes'), and its status; moving
// to another IP detaches first; deleting tears it down and drops the
// finalizer. Each step makes the calls the real CCM makes, in its order.
func TestLifecycleMakesTheCCMsCalls(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	x, err := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.10"), []string{"scw-lb-ipam"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api", UID: "uid-1", Annotations: map[string]string{
			annotationPrivate:      "true",
			annotationPNIDs:        w.nodes.ID + "," + w.pool.ID,
			annotationPrivateIPIDs: x,
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if err := w.kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}

	from := len(w.emu.Requests())
	w.ccm.Sync(ctx)
	got := w.get(t, "api")
	if !slices.Contains(got.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v", got.Finalizers)
	}
	lbs := w.emu.LBs()
	if len(lbs) != 1 || lbs[0].Name != "uid-1" {
		t.Fatalf("load balancers %+v", lbs)
	}
	lb := lbs[0]
	if want := "fr-par-1/" + lb.ID; got.Annotations[annotationLoadBalancerID] != want {
		t.Fatalf("scw-loadbalancer-id %q, want %q", got.Annotations[annotationLoadBalancerID], want)
	}
	if lb.PrivateNetworks[w.pool.ID] != x || lb.PrivateNetworks[w.nodes.ID] == "" || lb.PrivateNetworks[w.nodes.ID] == x {
		t.Fatalf("attachments %v: want %s on the pool's network and a DHCP IP on the nodes'", lb.PrivateNetworks, x)
	}
	ip, _ := w.emu.IP(x)
	if ip.Resource == nil || ip.Resource.ID != lb.ID || string(ip.Resource.Type) != "lb_server" {
		t.Fatalf("IPAM shows %s attached to %+v", x, ip.Resource)
	}
	ingress := map[string]bool{}
	for _, in := range got.Status.LoadBalancer.Ingress {
		ingress[in.IP] = true
	}
	if len(ingress) != 2 || !ingress["172.16.35.10"] {
		t.Fatalf("ingress %v: want the reserved address and the DHCP one", got.Status.LoadBalancer.Ingress)
	}
	// ListIPs once per network, in map order: compare the calls sorted
	// within that step.
	calls := w.ops(from)
	want := []string{"ListLBs", "CreateLB", "ListIPs", "ListIPs", "ListLBPrivateNetworks", "AttachPrivateNetwork", "AttachPrivateNetwork", "ListIPs"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}

	// Its own scw-loadbalancer-id changed the annotations: the next pass
	// ensures once more (the service controller's needsUpdate compares
	// annotations) and finds nothing to change; the one after makes no
	// call.
	from = len(w.emu.Requests())
	w.ccm.Sync(ctx)
	for _, call := range w.ops(from) {
		if !strings.HasPrefix(call, "Get") && !strings.HasPrefix(call, "List") {
			t.Fatalf("the pass after its own annotation wrote: %v", w.ops(from))
		}
	}
	from = len(w.emu.Requests())
	w.ccm.Sync(ctx)
	if calls := w.ops(from); len(calls) != 0 {
		t.Fatalf("a pass with nothing new called %v", calls)
	}

	// Another reserved IP: the pool's network is detached, then attached
	// with it; X is left booked and unattached.
	y, err := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.11"), []string{"scw-lb-ipam"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got.Annotations[annotationPrivateIPIDs] = y
	if err := w.kube.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	from = len(w.emu.Requests())
	w.ccm.Sync(ctx)
	if calls, want := w.ops(from), []string{"GetLB", "ListIPs", "ListIPs", "ListLBPrivateNetworks", "DetachPrivateNetwork", "AttachPrivateNetwork", "ListIPs"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if ip, ok := w.emu.IP(x); !ok || ip.Resource != nil {
		t.Fatalf("X after the move: booked %v, resource %+v", ok, ip.Resource)
	}
	if lb := w.emu.LBs()[0]; lb.PrivateNetworks[w.pool.ID] != y {
		t.Fatalf("attachments %v, want %s on the pool's network", lb.PrivateNetworks, y)
	}

	// Deleted: the annotation goes, the LB goes (its networks detached,
	// the DHCP IP released, Y kept booked), then the finalizer.
	if err := w.kube.Delete(ctx, w.get(t, "api")); err != nil {
		t.Fatal(err)
	}
	from = len(w.emu.Requests())
	w.ccm.Sync(ctx)
	if calls, want := w.ops(from), []string{"GetLB", "DeleteLB"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if err := w.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "api"}, &corev1.Service{}); err == nil {
		t.Fatal("the Service is still there once its finalizer should be gone")
	}
	if len(w.emu.LBs()) != 0 {
		t.Fatalf("load balancers left: %+v", w.emu.LBs())
	}
	if ip, ok := w.emu.IP(y); !ok || ip.Resource != nil {
		t.Fatalf("Y after the delete: booked %v, resource %+v", ok, ip.Resource)
	}
	for _, ip := range w.emu.IPs() {
		if ip.ID != x && ip.ID != y {
			t.Fatalf("IP %s (%s) left behind: the DHCP address is released with the LB", ip.ID, ip.Address)
		}
	}
}

// TestDelayKeepsTheServiceTerminating: with a delay, a deleted Service
// stays Terminating with its IP attached until the delay has passed.
func TestDelayKeepsTheServiceTerminating(t *testing.T) {
	w := newWorld(t)
	w.ccm.o.Delay = 300 * time.Millisecond
	ctx := context.Background()
	if err := w.kube.Create(ctx, privateLB("api", "uid-2")); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	if len(w.emu.LBs()) != 0 || slices.Contains(w.get(t, "api").Finalizers, Finalizer) {
		t.Fatal("acted before the delay")
	}
	time.Sleep(350 * time.Millisecond)
	w.ccm.Sync(ctx)
	if len(w.emu.LBs()) != 1 {
		t.Fatal("no Load Balancer after the delay")
	}
	if err := w.kube.Delete(ctx, w.get(t, "api")); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	if got := w.get(t, "api"); got.DeletionTimestamp == nil || len(w.emu.LBs()) != 1 {
		t.Fatal("torn down before the delay")
	}
	time.Sleep(350 * time.Millisecond)
	w.ccm.Sync(ctx)
	if len(w.emu.LBs()) != 0 {
		t.Fatal("the Load Balancer outlived the delay")
	}
}

// TestHoldKeepsTheTeardownWaiting: a held Service stays Terminating with
// its Load Balancer however long the passes go on; released, it is torn
// down after the delay as any other.
func TestHoldKeepsTheTeardownWaiting(t *testing.T) {
	w := newWorld(t)
	held := true
	w.ccm.o.Hold = func(svc types.NamespacedName) bool { return held && svc.Name == "api" }
	ctx := context.Background()
	if err := w.kube.Create(ctx, privateLB("api", "uid-3")); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	if len(w.emu.LBs()) != 1 {
		t.Fatal("held before the deletion: only the teardown waits")
	}
	if err := w.kube.Delete(ctx, w.get(t, "api")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.ccm.Sync(ctx)
	}
	if got := w.get(t, "api"); got.DeletionTimestamp == nil || len(w.emu.LBs()) != 1 {
		t.Fatal("torn down while held")
	}
	held = false
	w.ccm.Sync(ctx)
	if len(w.emu.LBs()) != 0 {
		t.Fatal("the Load Balancer outlived the hold")
	}
}

// TestCollectsTheLoadBalancerOfAServiceDeletedWithoutItsFinalizer: a
// Service that disappears without the finalizer's teardown (its finalizer
// removed by hand, or deleted before it was added) still has its Load
// Balancer deleted, its networks detached and its DHCP address released,
// as the service controller does from its informer's delete event.
func TestCollectsTheLoadBalancerOfAServiceDeletedWithoutItsFinalizer(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, svc := range []*corev1.Service{privateLB("keep", "uid-keep"), privateLB("gone", "uid-gone")} {
		if err := w.kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	w.ccm.Sync(ctx)
	if n := len(w.emu.LBs()); n != 2 {
		t.Fatalf("%d load balancers, want 2", n)
	}
	got := w.get(t, "gone")
	got.Finalizers = nil
	if err := w.kube.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := w.kube.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	lbs := w.emu.LBs()
	if len(lbs) != 1 || lbs[0].Name != "uid-keep" {
		t.Fatalf("load balancers after the delete: %+v, want only uid-keep's", lbs)
	}
	if n := len(w.emu.IPs()); n != 1 {
		t.Fatalf("%d IPs left, want keep's DHCP address only", n)
	}
}

// TestChangeDuringAPassIsActedOnNext: the Service moves to another IP
// while a pass is attaching its first one. The pass's own patches return
// the latest object; the next pass must still act on the move (detach X,
// attach Y), as the service controller does on the update event. Reading
// the version from the patched object instead left X attached for good.
func TestChangeDuringAPassIsActedOnNext(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	x, _ := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.10"), []string{"scw-lb-ipam"}, nil)
	y, _ := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.11"), []string{"scw-lb-ipam"}, nil)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api", UID: "uid-1", Annotations: map[string]string{
			annotationPrivate: "true", annotationPNIDs: w.nodes.ID + "," + w.pool.ID, annotationPrivateIPIDs: x,
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if err := w.kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// The move lands while the pass attaches X: before its status patch,
	// whose answer is the moved object.
	moved := false
	w.emu.SetFaultFunc(func(op scalewaytest.Op) *scalewaytest.Fault {
		if op == scalewaytest.OpAttachLBPrivateNetwork && !moved {
			moved = true
			cur := w.get(t, "api")
			cur.Annotations[annotationPrivateIPIDs] = y
			if err := w.kube.Update(ctx, cur); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	w.ccm.Sync(ctx) // attaches X: it read the Service before the move
	if ip, _ := w.emu.IP(x); !moved || ip.Resource == nil {
		t.Fatalf("the first pass did not attach X (moved %v)", moved)
	}
	w.ccm.Sync(ctx)
	if ip, _ := w.emu.IP(x); ip.Resource != nil {
		t.Fatal("X is still attached after the Service moved to Y")
	}
	if ip, _ := w.emu.IP(y); ip.Resource == nil {
		t.Fatal("Y is not attached")
	}
}
