package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// viewReservations is the size of the view's first sync: the issue's
// 10,000 reservations.
const viewReservations = 10_000

// viewNamespaces spread the reservations as tenants would.
const viewNamespaces = 20

// BenchmarkView prints the view's rows alone: a control plane of its own
// with the chart's CRDs, and a Mirror as the sweeper's leader runs it
// (app's client rate). Run it with -benchtime=1x.
func BenchmarkView(b *testing.B) { alone(b, (*report).viewRows) }

// viewRows measures the view's writes: a leader's first sync of 10,000
// reservations (time, writes, the process's heap while it writes), an idle
// cycle, one reservation changed, and a new leader's first cycle over a
// view another leader wrote.
func (r *report) viewRows() {
	b := r.b
	root, _ := filepath.Abs("../..")
	dir, err := os.MkdirTemp("", "scw-lb-ipam-bench-view-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	crds := filepath.Join(dir, "crds")
	if err := os.Mkdir(crds, 0o755); err != nil {
		b.Fatal(err)
	}
	out, err := testenv.HelmCommand(context.Background(), filepath.Join(root, "bin", "helm"), filepath.Join(dir, "helm"), "template", "x", filepath.Join(root, "charts", "scw-lb-ipam"),
		"--values", filepath.Join(root, "charts", "scw-lb-ipam", "ci", "self-managed-values.yaml"), "--show-only", "templates/crds.yaml").Output()
	if err != nil {
		b.Fatalf("helm template: %v", err)
	}
	if err := os.WriteFile(filepath.Join(crds, "view.yaml"), out, 0o600); err != nil {
		b.Fatal(err)
	}
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{Bin: filepath.Join(root, "bin"), Dir: dir, CRDs: crds,
		APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/16"}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	ctx := context.Background()
	for i := range viewNamespaces {
		if err := cp.Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%02d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	snap := &view.Snapshot{Reservations: make([]view.Reservation, viewReservations)}
	for i := range snap.Reservations {
		snap.Reservations[i] = view.Reservation{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Namespace: fmt.Sprintf("tenant-%02d", i%viewNamespaces),
			Status: view.ReservationStatus{Address: fmt.Sprintf("10.%d.%d.%d", 20+i>>16, i>>8&255, i&255), Pool: "dc-link", Service: fmt.Sprintf("svc-%d", i), State: view.StateLive,
				AttachedTo: fmt.Sprintf("lb_server/%012d (svc-%d)", i, i)}}
	}
	created := time.Now()
	snap.Services = viewServices(b, cp.Kube, snap.Reservations)
	r.printf("View (a Mirror on a real kube-apiserver and etcd, client at %d QPS; %d Services made for it in %s)\n", view.QPS, len(snap.Services), time.Since(created).Round(time.Second))
	mirror := func() *view.Mirror {
		// The client app.Replica.mirror builds.
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.Burst = view.QPS, 2*view.QPS
		c, err := client.New(cfg, client.Options{Scheme: cp.Kube.Scheme()})
		if err != nil {
			b.Fatal(err)
		}
		return view.NewMirror(view.Options{Client: c, Reader: c, Log: logr.Discard()})
	}

	m := mirror()
	w, d, heap := publishMeasured(b, m, snap)
	r.printf("  first sync, %d reservations and their Services: %d IPReservations and %d Services' conditions written in %s (%.0f/s), heap +%.1f MB while writing\n",
		viewReservations, w.Objects, w.Services, d.Round(time.Millisecond), float64(w.Total())/d.Seconds(), float64(heap)/1e6)
	r.printf("  %s  first sync within one sweep interval (1m), one write per object: %s\n",
		r.check("the view's first sync at 10,000 reservations within one sweep interval (1m), one write per object", d < time.Minute && w.Objects == viewReservations && w.Services == viewReservations, d.Round(time.Millisecond).String()), d.Round(time.Second))
	// As the Service informer then shows them: carrying their conditions.
	for i := range snap.Services {
		snap.Services[i].Digest = servicecache.ConditionsDigest(snap.Services[i].Conditions)
	}
	w, d, _ = publishMeasured(b, m, snap)
	r.printf("  %s  idle cycle: %d writes (%s)\n", r.check("writes per idle cycle: 0", w.Total() == 0, fmt.Sprint(w.Total())), w.Total(), d.Round(time.Millisecond))
	snap.Reservations[7].Status.State = view.StateRetained
	w, d, _ = publishMeasured(b, m, snap)
	r.printf("  one reservation retained: %d write (%s)\n", w.Total(), d.Round(time.Millisecond))
	snap.Reservations = snap.Reservations[1:]
	w, _, _ = publishMeasured(b, m, snap)
	r.printf("  one reservation released: %d deletion\n", w.Deleted)
	next := mirror()
	w, d, _ = publishMeasured(b, next, snap)
	r.printf("  %s  a new leader's first cycle over the same view: %d writes (%s: one paged list)\n\n",
		r.check("a new leader's first cycle over an unchanged view writes nothing", w.Total() == 0, fmt.Sprint(w.Total())), w.Total(), d.Round(time.Millisecond))
}

// viewServices creates a Service per reservation, as a first install
// finds them (no condition of ours yet), and returns the conditions the
// leader would write on each.
func viewServices(b *testing.B, kube client.Client, rs []view.Reservation) []view.ServiceConditions {
	out := make([]view.ServiceConditions, len(rs))
	g := errgroup.Group{}
	g.SetLimit(16)
	for i, res := range rs {
		g.Go(func() error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: res.Namespace, Name: res.Status.Service},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
			if err := kube.Create(context.Background(), svc); err != nil {
				return err
			}
			out[i] = view.ServiceConditions{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID), Conditions: []metav1.Condition{
				{Type: view.ConditionReserved, Status: metav1.ConditionTrue, Reason: "Reserved", Message: "IPAM IP " + res.ID + " (" + res.Status.Address + ") in pool dc-link"},
				{Type: view.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "attached to Load Balancer " + res.Status.AttachedTo},
			}}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("creating the Services: %v", err)
	}
	return out
}

// publishMeasured publishes snap with m, and reports what it wrote, how
// long it took and the most the heap grew meanwhile.
func publishMeasured(b *testing.B, m *view.Mirror, snap *view.Snapshot) (view.Writes, time.Duration, uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var s runtime.MemStats
				runtime.ReadMemStats(&s)
				if s.HeapInuse > base && s.HeapInuse-base > peak.Load() {
					peak.Store(s.HeapInuse - base)
				}
			}
		}
	}()
	start := time.Now()
	w, err := m.Publish(context.Background(), snap)
	d := time.Since(start)
	close(done)
	if err != nil || w.Errors > 0 {
		b.Fatalf("publishing the view: %v (%d writes failed)", err, w.Errors)
	}
	return w, d, peak.Load()
}
