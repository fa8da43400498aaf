package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// scenario runs one numbered scenario and records its Scaleway calls.
// The CCM stand-in's calls are not counted.
func scenario(t *testing.T, f func(t *testing.T)) {
	from := len(s.Emu.Requests())
	defer func() { s.record(t, s.WebhookCalls(from)) }()
	f(t)
}

// poll is how often the suite looks again at what it waits for.
const poll = 100 * time.Millisecond

func clientWithWarnings(t *testing.T) (client.Client, *testenv.Warnings) {
	w := &testenv.Warnings{}
	c, err := s.Client(w)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func get(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := s.Kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// del deletes a Service and waits until it is gone: the CCM stand-in keeps
// a LoadBalancer Service Terminating until it deleted its Load Balancer.
func del(t *testing.T, svc *corev1.Service) {
	t.Helper()
	if err := s.Kube.Delete(context.Background(), svc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	fixtures.Eventually(t, 20*time.Second, poll, "Service "+svc.Namespace+"/"+svc.Name+" to be gone", func() bool {
		return apierrors.IsNotFound(s.Kube.Get(context.Background(), client.ObjectKeyFromObject(svc), &corev1.Service{}))
	})
}

func TestScenario1PoolAnnotationReservesAnIP(t *testing.T) {
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

func TestScenario2NamespaceWithoutLabelUntouched(t *testing.T) {
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

func TestScenario3ServerSideDryRunBooksNothing(t *testing.T) {
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
			if e.Kind == ipamtest.AuditBook {
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

func TestScenario4DeniedAfterMutationIsReclaimed(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "deny-leaky"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: `object.metadata.name != "leaky"`, Message: "no leaky Services"}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "deny-leaky"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "deny-leaky",
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}
		for _, o := range []client.Object{policy, binding} {
			if err := s.Kube.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			defer s.Kube.Delete(ctx, o)
		}
		svc := fixtures.PrivateService("payments", "leaky", map[string]string{request.AnnotationPool: "general"})
		var leaked string
		// The policy takes a moment to be loaded by the apiserver.
		fixtures.Eventually(t, 20*time.Second, poll, "the policy to deny after our mutation", func() bool {
			err := s.Kube.Create(ctx, svc.DeepCopy())
			if err == nil {
				del(t, svc)
				return false
			}
			if !strings.Contains(err.Error(), "no leaky Services") {
				t.Fatalf("unexpected error: %v", err)
			}
			for _, ip := range s.Emu.IPs() {
				if e, ok := ipam.ParseEntry(ip.Tags); ok && e.Service.String() == "payments/leaky" {
					leaked = ip.ID
				}
			}
			return leaked != ""
		})
		// Booked, Service absent: the sweeper reclaims it after the pending grace.
		fixtures.Eventually(t, pendingGrace+15*time.Second, poll, "the sweeper to reclaim the leaked IP", func() bool {
			_, ok := s.Emu.IP(leaked)
			return !ok
		})
	})
}

func TestScenario5RetentionKeepsThenReleases(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		create := func() string {
			svc := fixtures.PrivateService("payments", "stable", map[string]string{request.AnnotationPool: "dc-link"})
			if err := s.Kube.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
			return get(t, "payments", "stable").Annotations[ccm.AnnotationPrivateIPIDs]
		}
		orphaned := func(id string) func() bool {
			return func() bool {
				ip, ok := s.Emu.IP(id)
				e, _ := ipam.ParseEntry(ip.Tags)
				return ok && !e.OrphanedSince.IsZero()
			}
		}
		id := create()
		// The sweeper sees the Service live and back-fills its uid: from
		// then on the reservation is kept for the pool's retention.
		backfilled(t, get(t, "payments", "stable"), id)
		// The CCM attaches the IP to the Load Balancer...
		attachedTo(t, "payments", "stable", id)
		// ...and Scaleway detaches it once the LB is gone, which happens
		// after the Service is: the CCM lets the Service go as soon as
		// DeleteLB is accepted.
		del(t, get(t, "payments", "stable"))
		fixtures.Eventually(t, 15*time.Second, poll, "detached once the Load Balancer is gone", func() bool {
			ip, _ := s.Emu.IP(id)
			return ip.Resource == nil
		})
		fixtures.Eventually(t, 10*time.Second, poll, "orphaned-since after the delete", orphaned(id))
		// Re-created within retention: the same IP comes back.
		if again := create(); again != id {
			t.Fatalf("re-created Service got %s, want %s", again, id)
		}
		attachedTo(t, "payments", "stable", id)
		ip, _ := s.Emu.IP(id)
		if e, _ := ipam.ParseEntry(ip.Tags); !e.OrphanedSince.IsZero() {
			t.Fatal("orphaned-since kept after the reuse")
		}
		// Deleted for good: released once the retention has passed.
		del(t, get(t, "payments", "stable"))
		fixtures.Eventually(t, 10*time.Second, poll, "orphaned-since after the second delete", orphaned(id))
		ip, _ = s.Emu.IP(id)
		e, _ := ipam.ParseEntry(ip.Tags)
		fixtures.Eventually(t, retention+15*time.Second, poll, "the release after retention", func() bool {
			_, ok := s.Emu.IP(id)
			return !ok
		})
		// Judged on the clocks that decide: the tag's and the release's.
		i := slices.IndexFunc(s.Emu.Audit(), func(ev ipamtest.AuditEvent) bool { return ev.Kind == ipamtest.AuditRelease && ev.IPID == id })
		if i < 0 {
			t.Fatalf("no release of %s in the audit log", id)
		}
		if kept := s.Emu.Audit()[i].Time.Sub(e.OrphanedSince); kept < retention {
			t.Fatalf("released %s after orphaned-since %s, before the %s retention", kept, e.OrphanedSince, retention)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// update changes a Service as kubectl edit does: read, change, write,
// again on a conflict (the CCM stand-in patches Services meanwhile).
func update(c client.Client, ns, name string, change func(*corev1.Service)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc := &corev1.Service{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			return err
		}
		change(svc)
		return c.Update(context.Background(), svc)
	})
}

// backfilled waits until the sweeper has written svc's uid on its
// reservation id: from then on it is kept for its pool's retention, not
// the shorter pending grace.
func backfilled(t *testing.T, svc *corev1.Service, id string) {
	t.Helper()
	fixtures.Eventually(t, 15*time.Second, poll, "the uid of "+svc.Namespace+"/"+svc.Name+" back-filled on "+id, func() bool {
		ip, _ := s.Emu.IP(id)
		e, _ := ipam.ParseEntry(ip.Tags)
		return e.UID == string(svc.UID)
	})
}

// attachedTo waits until the CCM stand-in has attached IPAM ID id to the
// Load Balancer of Service ns/name, through the Load Balancer API.
func attachedTo(t *testing.T, ns, name, id string) {
	t.Helper()
	fixtures.Eventually(t, 15*time.Second, poll, fmt.Sprintf("%s attached to the Load Balancer of %s/%s", id, ns, name), func() bool {
		svc := &corev1.Service{}
		if err := s.Kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			return false
		}
		_, lb, _ := strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/")
		ip, ok := s.Emu.IP(id)
		return ok && lb != "" && ip.Resource != nil && ip.Resource.ID == lb && string(ip.Resource.Type) == "lb_server"
	})
}

func TestScenario6ConcurrentCreates(t *testing.T) {
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

func TestScenario7PoolChange(t *testing.T) {
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

func TestScenario9NonLoadBalancerNeverReachesTheWebhook(t *testing.T) {
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

// TestScenario8WebhookStopped runs last: it stops the webhook.
func TestScenario8WebhookStopped(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		// A Service with its Load Balancer, deleted while the webhook is
		// down: the CCM's last patch (the finalizer removed) must not need
		// the webhook, or the Service would stay Terminating for as long
		// as the webhook is down.
		doomed := fixtures.PrivateService("payments", "doomed", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, doomed); err != nil {
			t.Fatal(err)
		}
		attachedTo(t, "payments", "doomed", get(t, "payments", "doomed").Annotations[ccm.AnnotationPrivateIPIDs])
		s.StopWebhook()
		defer func() {
			if err := s.StartWebhook(); err != nil {
				t.Fatal(err)
			}
		}()
		del(t, get(t, "payments", "doomed"))
		err := s.Kube.Create(ctx, fixtures.PrivateService("payments", "while-down", map[string]string{request.AnnotationPool: "dc-link"}))
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("opted-in create with the webhook down: %v", err)
		}
		other := fixtures.PrivateService("plain", "while-down", nil)
		if err := s.Kube.Create(ctx, other); err != nil {
			t.Fatalf("a namespace that did not opt in is affected: %v", err)
		}
		del(t, other)
		internal := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "internal-down"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if err := s.Kube.Create(ctx, internal); err != nil {
			t.Fatalf("a ClusterIP Service in an opted-in namespace is affected: %v", err)
		}
		del(t, internal)
	})
}
