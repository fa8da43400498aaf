package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

func TestPoolAnnotationReservesAnIP(t *testing.T) {
	scenario(t, func(t *testing.T) {
		c, w := clientWithWarnings(t)
		creates := make([]float64, len(s.Replicas))
		for i, r := range s.Replicas {
			creates[i] = r.Creates()
		}
		svc := fixtures.PrivateService("payments", "api", map[string]string{request.AnnotationPool: "dc-link"})
		if err := c.Create(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		got := get(t, "payments", "api")
		id := got.Annotations[ccm.AnnotationPrivateIPIDs]
		ip, ok := s.Emu.IP(id)
		if !ok {
			t.Fatalf("annotation %q names no booked IP", id)
		}
		addr := strings.Split(ip.Address.String(), "/")[0]
		if got.Annotations[request.AnnotationAddresses] != addr {
			t.Fatalf("addresses %q, booked %s", got.Annotations[request.AnnotationAddresses], addr)
		}
		if want := s.PNs["nodes"].ID + "," + s.PNs["dc"].ID; got.Annotations[ccm.AnnotationPNIDs] != want {
			t.Fatalf("pn-ids %q, want %q", got.Annotations[ccm.AnnotationPNIDs], want)
		}
		if got.Spec.LoadBalancerIP != "" {
			t.Fatal("spec.loadBalancerIP written")
		}
		e, _ := ipam.ParseEntry(ip.Tags)
		if e.Cluster != "it" || e.Pool != "dc-link" || e.Service.String() != "payments/api" {
			t.Fatalf("ledger %+v", e)
		}
		want := fmt.Sprintf("scw-lb-ipam: reserved %s (IPAM ID %s) from pool dc-link", addr, id)
		if len(w.List()) != 1 || w.List()[0] != want {
			t.Fatalf("warnings %q, want %q", w.List(), want)
		}
		// The replica that answered counts it in its pool view (what the
		// gauges report) without another Scaleway call.
		var r *testenv.Replica
		for i, rep := range s.Replicas {
			if rep.Creates() > creates[i] {
				r = rep
			}
		}
		if r == nil {
			t.Fatal("no replica answered the CREATE")
		}
		total, _ := r.Gauge("scw_lb_ipam_pool_addresses", "pool", "dc-link", "state", "total")
		used, _ := r.Gauge("scw_lb_ipam_pool_addresses", "pool", "dc-link", "state", "used_by_cluster")
		if total != 120 || used < 1 {
			t.Fatalf("%s: pool gauges total %v used %v", r.Name, total, used)
		}
		var holder string
		for _, p := range r.Allocator().Inventory().Report() {
			for _, a := range p.Addresses {
				if a.IPID == id {
					holder = a.Holder
				}
			}
		}
		if !strings.HasPrefix(holder, "Service payments/api") {
			t.Fatalf("%s's view holds %s for %q, want Service payments/api", r.Name, id, holder)
		}
	})
}

func TestNamespaceWithoutLabelUntouched(t *testing.T) {
	scenario(t, func(t *testing.T) {
		from, before := len(s.Emu.Requests()), s.Creates()
		svc := fixtures.PrivateService("plain", "api", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		got := get(t, "plain", "api")
		for _, k := range []string{ccm.AnnotationPrivateIPIDs, ccm.AnnotationPNIDs, request.AnnotationAddresses} {
			if _, ok := got.Annotations[k]; ok {
				t.Fatalf("annotation %s written in a namespace that did not opt in", k)
			}
		}
		if n := s.Creates() - before; n != 0 {
			t.Fatalf("the webhook answered %v CREATEs for a namespace that did not opt in", n)
		}
		// The index refresh and the sweeper list by cluster tag at any
		// moment; a call on behalf of this Service books or names it.
		if calls := s.CallsFor(from, types.NamespacedName{Namespace: "plain", Name: "api"}); len(calls) > 0 {
			t.Fatalf("the emulator saw calls for plain/api: %v", calls)
		}
	})
}

func TestServerSideDryRunBooksNothing(t *testing.T) {
	scenario(t, func(t *testing.T) {
		c, w := clientWithWarnings(t)
		// Counted as bookings, not IPs: the sweeper may release an earlier
		// scenario's IP meanwhile.
		audit := len(s.Emu.Audit())
		svc := fixtures.PrivateService("payments", "dry", map[string]string{request.AnnotationPool: "dc-link"})
		if err := c.Create(context.Background(), svc, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		for _, e := range s.Emu.Audit()[audit:] {
			if e.Kind == emulator.AuditBook {
				t.Fatalf("dry run booked %s (%s)", e.IPID, e.Address)
			}
		}
		if len(w.List()) != 1 || !strings.Contains(w.List()[0], "dry run: would reserve") {
			t.Fatalf("warnings %q", w.List())
		}
		if err := s.Kube.Get(context.Background(), client.ObjectKeyFromObject(svc), &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Fatalf("dry run stored the Service: %v", err)
		}
	})
}

func TestConcurrentCreates(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		const n = 50
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				errs[i] = s.Kube.Create(ctx, fixtures.PrivateService("web", fmt.Sprint("burst-", i), map[string]string{request.AnnotationPool: "dc-link"}))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("create %d: %v", i, err)
			}
		}
		ids := map[string]string{}
		addrs := map[string]string{}
		for i := range n {
			name := fmt.Sprint("burst-", i)
			svc := get(t, "web", name)
			id, addr := svc.Annotations[ccm.AnnotationPrivateIPIDs], svc.Annotations[request.AnnotationAddresses]
			if other, dup := ids[id]; dup {
				t.Fatalf("%s and %s share IPAM ID %s", other, name, id)
			}
			if other, dup := addrs[addr]; dup {
				t.Fatalf("%s and %s share address %s", other, name, addr)
			}
			ids[id], addrs[addr] = name, name
			ip, ok := s.Emu.IP(id)
			e, _ := ipam.ParseEntry(ip.Tags)
			if !ok || e.Service.String() != "web/"+name || e.Pool != "dc-link" {
				t.Fatalf("ledger of %s: %+v", name, e)
			}
			defer del(t, svc)
		}
		// Ledger consistent: no IP of this pool tagged for a burst Service
		// that does not reference it.
		for _, ip := range s.Emu.IPs() {
			e, ok := ipam.ParseEntry(ip.Tags)
			if ok && strings.HasPrefix(e.Service.Name, "burst-") && ids[ip.ID] != e.Service.Name {
				t.Fatalf("IP %s is tagged for %s, which does not reference it", ip.ID, e.Service)
			}
		}
	})
}

func TestPoolChange(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		svc := fixtures.PrivateService("payments", "mover", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		live := get(t, "payments", "mover")
		defer del(t, live)
		oldID := live.Annotations[ccm.AnnotationPrivateIPIDs]
		err := update(s.Kube, "payments", "mover", func(svc *corev1.Service) {
			svc.Annotations[request.AnnotationPool] = "general"
		})
		if err == nil || !strings.Contains(err.Error(), "allow-ip-change") {
			t.Fatalf("pool change without allow-ip-change: %v", err)
		}
		if err := update(s.Kube, "payments", "mover", func(svc *corev1.Service) {
			svc.Annotations[request.AnnotationPool] = "general"
			svc.Annotations[request.AnnotationAllowIPChange] = "true"
		}); err != nil {
			t.Fatal(err)
		}
		moved := get(t, "payments", "mover")
		newID := moved.Annotations[ccm.AnnotationPrivateIPIDs]
		if newID == oldID || !strings.HasPrefix(moved.Annotations[request.AnnotationAddresses], "10.10.0.") {
			t.Fatalf("not moved: %v", moved.Annotations)
		}
		if want := s.PNs["nodes"].ID + "," + s.PNs["edge"].ID; moved.Annotations[ccm.AnnotationPNIDs] != want {
			t.Fatalf("pn-ids %q, want %q (the old pool's network dropped)", moved.Annotations[ccm.AnnotationPNIDs], want)
		}
		fixtures.Eventually(t, 10*time.Second, poll, "the old IP orphaned", func() bool {
			ip, ok := s.Emu.IP(oldID)
			e, _ := ipam.ParseEntry(ip.Tags)
			return !ok || !e.OrphanedSince.IsZero()
		})
	})
}

func TestNonLoadBalancerNeverReachesTheWebhook(t *testing.T) {
	scenario(t, func(t *testing.T) {
		before := s.Creates()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "internal", Annotations: map[string]string{request.AnnotationPool: "dc-link"}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if err := s.Kube.Create(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		// Nor does one of another load-balancer controller (MetalLB, Cilium):
		// the CCM ignores it, and the chart's matchConditions keep it away.
		class := fixtures.PrivateService("payments", "metallb", map[string]string{request.AnnotationPool: "dc-link"})
		className := "metallb.io/metallb"
		class.Spec.LoadBalancerClass = &className
		if err := s.Kube.Create(context.Background(), class); err != nil {
			t.Fatal(err)
		}
		defer del(t, class)
		if got := get(t, "payments", "metallb").Annotations[ccm.AnnotationPrivateIPIDs]; got != "" {
			t.Fatalf("a Service with spec.loadBalancerClass got private-ip-ids %q", got)
		}
		// A LoadBalancer Service right after does reach it: the counter works.
		lb := fixtures.PrivateService("payments", "counted", nil)
		if err := s.Kube.Create(context.Background(), lb); err != nil {
			t.Fatal(err)
		}
		defer del(t, lb)
		if got := s.Creates() - before; got != 1 {
			t.Fatalf("%v admissions for a ClusterIP, a classed and one LoadBalancer Service, want 1", got)
		}
	})
}

// TestNamespaceLabelledAfterTheLoadBalancer: a LoadBalancer
// Service that got its Load Balancer (and a DHCP address) before its
// namespace opted in keeps that address through a label change and a
// helm-upgrade-style full UPDATE: no annotation written, no IPAM write, a
// warning each time, and the sweeper's leader counts it as unreserved.
func TestNamespaceLabelledAfterTheLoadBalancer(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late"}}
		if err := s.Kube.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		svc := fixtures.PrivateService("late", "legacy", map[string]string{request.AnnotationPool: "general"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		// The CCM makes its Load Balancer, attached to the nodes' network
		// with a DHCP address, and marks the Service: finalizer, LB ID,
		// ingress.
		var dhcp string
		fixtures.Eventually(t, 15*time.Second, poll, "the CCM's Load Balancer with a DHCP address", func() bool {
			got := get(t, "late", "legacy")
			if len(got.Status.LoadBalancer.Ingress) == 0 || got.Annotations[ccm.AnnotationLoadBalancerID] == "" ||
				!slices.Contains(got.Finalizers, ccm.FinalizerLoadBalancerCleanup) {
				return false
			}
			dhcp = got.Status.LoadBalancer.Ingress[0].IP
			return true
		})
		if !strings.HasPrefix(dhcp, "172.16.") {
			t.Fatalf("ingress %s is not on the nodes' network 172.16.0.0/22", dhcp)
		}
		ns.Labels = map[string]string{request.LabelEnabled: "true"}
		if err := s.Kube.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
		want := `scw-lb-ipam: Service late/legacy already has a Load Balancer with a DHCP address and no reserved IP; it keeps that address and nothing was reserved. To move it to a reserved IP (pool general), set annotation scw-lb-ipam.io/allow-ip-change: "true" (the CCM re-attaches the Load Balancer: a brief outage)`
		// The webhook sees the label once the apiserver's namespaceSelector
		// and each replica's Namespace cache have it: a dry-run update
		// through each replica warns then (and changes nothing).
		for _, r := range s.Replicas {
			restore := routeTo(t, r)
			fixtures.Eventually(t, 10*time.Second, poll, r.Name+" to see the namespace label", func() bool {
				dc, dw := clientWithWarnings(t)
				err := update(client.NewDryRunClient(dc), "late", "legacy", func(svc *corev1.Service) { svc.Labels = map[string]string{"probe": r.Name} })
				return err == nil && slices.Contains(dw.List(), want)
			})
			restore()
		}
		audit := len(s.Emu.Audit())

		c, w := clientWithWarnings(t)
		if err := update(c, "late", "legacy", func(svc *corev1.Service) { svc.Labels = map[string]string{"team": "edge"} }); err != nil {
			t.Fatal(err)
		}
		// A helm upgrade sends the whole object as the chart renders it.
		if err := update(c, "late", "legacy", func(cur *corev1.Service) {
			full := fixtures.PrivateService("late", "legacy", map[string]string{request.AnnotationPool: "general"})
			full.Spec.Ports = append(full.Spec.Ports, corev1.ServicePort{Name: "http", Port: 80})
			full.Labels = map[string]string{"team": "edge", "chart": "legacy-2"}
			full.ResourceVersion, full.Finalizers, full.Spec.ClusterIP, full.Spec.ClusterIPs = cur.ResourceVersion, cur.Finalizers, cur.Spec.ClusterIP, cur.Spec.ClusterIPs
			full.Spec.Ports[0].NodePort = cur.Spec.Ports[0].NodePort
			*cur = *full
		}); err != nil {
			t.Fatal(err)
		}
		after := get(t, "late", "legacy")
		if len(after.Status.LoadBalancer.Ingress) != 1 || after.Status.LoadBalancer.Ingress[0].IP != dhcp {
			t.Fatalf("ingress %v, want the DHCP address %s kept", after.Status.LoadBalancer.Ingress, dhcp)
		}
		for _, k := range []string{ccm.AnnotationPrivateIPIDs, ccm.AnnotationPNIDs, request.AnnotationAddresses} {
			if v, ok := after.Annotations[k]; ok {
				t.Fatalf("annotation %s written: %q", k, v)
			}
		}
		if !slices.Equal(w.List(), []string{want, want}) {
			t.Fatalf("warnings %q, want the DHCP warning twice", w.List())
		}
		// The webhook writes through IPAM; the CCM's Load Balancer calls
		// carry their LB's ID. The sweeper may write other Services' tags
		// meanwhile: a write for this one books or names it.
		tag := ipam.ServiceTag(types.NamespacedName{Namespace: "late", Name: "legacy"})
		for _, e := range s.Emu.Audit()[audit:] {
			if e.LBID == "" && (e.Kind == emulator.AuditBook || slices.Contains(e.Tags, tag)) {
				t.Fatalf("IPAM write %s of %s %s for a Service that keeps its DHCP address", e.Kind, e.IPID, e.Address)
			}
		}
		fixtures.Eventually(t, 15*time.Second, poll, "the unreserved gauge to count it", func() bool {
			return s.Total("scw_lb_ipam_unreserved_services") == 1
		})
		fixtures.Eventually(t, 10*time.Second, poll, "the sweeper's IPNotReserved Event", func() bool {
			var list eventsv1.EventList
			if err := s.Kube.List(ctx, &list, client.InNamespace("late")); err != nil {
				return false
			}
			for _, e := range list.Items {
				if e.Reason == "IPNotReserved" && e.Regarding.Name == "legacy" && strings.Contains(e.Note, "admitted without scw-lb-ipam") {
					return true
				}
			}
			return false
		})
	})
}
