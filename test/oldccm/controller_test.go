package oldccm

import (
	"context"
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

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// world is the emulator, a fake apiserver and the fake CCM between them.
type world struct {
	emu         *emulator.Server
	kube        client.Client
	ccm         *Controller
	nodes, pool emulator.PrivateNetwork
}

// newWorld builds a world; opts adjust the emulator's options.
func newWorld(t *testing.T, opts ...func(*emulator.Options)) *world {
	t.Helper()
	var o emulator.Options
	for _, f := range opts {
		f(&o)
	}
	w := &world{emu: emulator.NewTestServer(t, o)}
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

// ops are the operations the fake called since request from, in order.
func (w *world) ops(from int) []string {
	var out []string
	for _, r := range w.emu.Requests()[from:] {
		if r.Op != emulator.OpMetadata && strings.Contains(r.UserAgent, UserAgent) {
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
