package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/claims"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// TestScenario10NamespaceLabelledAfterTheLoadBalancer: a LoadBalancer
// Service that got its Load Balancer (and a DHCP address) before its
// namespace opted in keeps that address through a label change and a
// helm-upgrade-style full UPDATE: no annotation written, no IPAM write, a
// warning each time, and the sweeper's leader counts it as unreserved.
func TestScenario10NamespaceLabelledAfterTheLoadBalancer(t *testing.T) {
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
			if e.LBID == "" && (e.Kind == ipamtest.AuditBook || slices.Contains(e.Tags, tag)) {
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

// TestScenario11BringYourOwnAcrossReplicas: two allocators that share
// nothing but the emulator and the apiserver (their own Scaleway clients,
// Service caches and claim clients, as two webhook replicas have) validate
// the same bring-your-own IPAM ID for two Services at the same moment:
// exactly one wins, for every ID. Without the claim both win, which is the
// race this closes (the caches know neither Service yet).
func TestScenario11BringYourOwnAcrossReplicas(t *testing.T) {
	scenario(t, func(t *testing.T) {
		const ids = 12
		byo := make([]string, ids)
		for i := range byo {
			id, err := s.Emu.AddIP(s.PNs["edge"].ID, netipOf(t, "10.10.0.", 150+i), []string{"reserved-by-terraform"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			byo[i] = id
		}
		one, two := replica(t, true), replica(t, true)
		wins := race(t, one, two, byo)
		for i, n := range wins {
			if n != 1 {
				t.Errorf("IPAM ID %s: %d Services won, want exactly 1", byo[i], n)
			}
		}
		// The same race without the claim: both win.
		bare1, bare2 := replica(t, false), replica(t, false)
		double := 0
		for _, n := range race(t, bare1, bare2, byo[:1]) {
			if n == 2 {
				double++
			}
		}
		if double != 1 {
			t.Fatalf("without claims the race was not reproduced (%d double wins): the test does not drive it", double)
		}
	})
}

// replica is an allocator with its own Scaleway client, Service cache and
// claims, as one webhook replica has.
func replica(t *testing.T, withClaims bool) *ipam.Allocator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: "fr-par", ClientOptions: s.ScalewayOptions()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ipam.ParseConfig([]byte(s.PoolFile()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Resolve(ctx, cloud); err != nil {
		t.Fatal(err)
	}
	c, err := s.Client(nil)
	if err != nil {
		t.Fatal(err)
	}
	services, err := cache.New(s.Config, cache.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ccm.IndexServices(ctx, services); err != nil {
		t.Fatal(err)
	}
	if _, err := services.GetInformer(ctx, &corev1.Service{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = services.Start(ctx) }()
	if !services.WaitForCacheSync(ctx) {
		t.Fatal("cache not synced")
	}
	o := ipam.AllocatorOptions{Cloud: cloud, Config: cfg, References: ccm.References{Reader: services}}
	if withClaims {
		o.Claims = &claims.Leases{Client: c, Reader: c, Namespace: "default", Fresh: 2 * webhookTimeout, Clock: clock.RealClock{}}
	}
	return ipam.NewAllocator(o)
}

// race validates each ID for Service web/a-<i> on one replica and web/b-<i>
// on the other at the same moment; it returns how many won per ID.
func race(t *testing.T, one, two *ipam.Allocator, ids []string) []int {
	t.Helper()
	wins := make([]int, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, id := range ids {
		start := make(chan struct{})
		for _, side := range []struct {
			a    *ipam.Allocator
			name string
		}{{one, "a"}, {two, "b"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				svc := types.NamespacedName{Namespace: "web", Name: side.name + "-" + id[:8]}
				if _, err := side.a.ValidateID(context.Background(), ipam.IDRequest{ID: id, Service: svc}); err == nil {
					mu.Lock()
					wins[i]++
					mu.Unlock()
				} else if ipam.ReasonOf(err) != ipam.ReasonIDNotUsable {
					t.Errorf("%s: %v", svc, err)
				}
			}()
		}
		close(start)
	}
	wg.Wait()
	return wins
}

func netipOf(t *testing.T, prefix string, i int) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(prefix + strconv.Itoa(i))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestScenario12APIServerOutage: the webhook process loses the apiserver
// for 15 s, longer than the sweeper's renew deadline: its lease is
// lost, yet the same process keeps serving, answers admissions afterwards
// with no restart, and leads the sweeper again within the lease duration.
func TestScenario12APIServerOutage(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		fixtures.Eventually(t, 20*time.Second, poll, "a sweeper leader", func() bool { return s.Total("scw_lb_ipam_sweeper_leader") == 1 })
		restore := s.CutAPIServer()
		defer restore()
		cut := time.Now()
		fixtures.Eventually(t, 15*time.Second, poll, "the lease to be lost", func() bool { return s.Total("scw_lb_ipam_sweeper_leader") == 0 })
		lost := time.Since(cut)
		time.Sleep(15*time.Second - time.Since(cut))
		restore()
		back := time.Now()
		if !s.Serving() {
			t.Fatal("the webhook process ended with the lost lease")
		}
		fixtures.Eventually(t, leaseDuration, poll, "a sweeper leader again within the lease duration", func() bool { return s.Total("scw_lb_ipam_sweeper_leader") == 1 })
		t.Logf("lease lost %s into the outage; leader again %s after it", lost.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
		svc := fixtures.PrivateService("payments", "after-outage", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		if got := get(t, "payments", "after-outage"); got.Annotations[ccm.AnnotationPrivateIPIDs] == "" {
			t.Fatal("the admission after the outage reserved nothing")
		}
		if !s.Serving() {
			t.Fatal("the webhook process was restarted")
		}
	})
}

// TestScenario13RecreateWhileTerminating: helm --force (or an Argo CD
// replace) deletes a Service and creates it again at once. The CCM's
// finalizer keeps the old one Terminating with its IP X attached to the old
// Load Balancer; the client retries the create as kubectl and Helm do
// (AlreadyExists, and the webhook's 429 "still held" that client-go
// retries after its Retry-After). The new
// api ends with X, its new Load Balancer attached with X, and once the
// sweeper settled no other reservation for it remains.
func TestScenario13RecreateWhileTerminating(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		svc := fixtures.PrivateService("payments", "replaced", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		x := get(t, "payments", "replaced").Annotations[ccm.AnnotationPrivateIPIDs]
		attachedTo(t, "payments", "replaced", x)
		old := get(t, "payments", "replaced")
		// X is the reservation a live Service used.
		backfilled(t, old, x)
		replaceWhileTerminating(t, old, x, map[string]string{request.AnnotationPool: "dc-link"})
		// Whatever was booked on the way is reclaimed: only X is left.
		fixtures.Eventually(t, pendingGrace+15*time.Second, poll, "only X reserved for payments/replaced", func() bool {
			for _, ip := range s.Emu.IPs() {
				if e, ok := ipam.ParseEntry(ip.Tags); ok && e.Owns("it") && e.Service.String() == "payments/replaced" && ip.ID != x {
					return false
				}
			}
			return true
		})
	})
}

// replaceWhileTerminating deletes old, whose Load Balancer holds x, and
// creates it again at once with ann, retrying as kubectl and Helm do (on a
// 429 client-go itself retries after Retry-After): the new Service ends
// with x, attached to its own new Load Balancer.
func replaceWhileTerminating(t *testing.T, old *corev1.Service, x string, ann map[string]string) {
	t.Helper()
	ctx := context.Background()
	ns, name := old.Namespace, old.Name
	// The old Load Balancer lets X go only once the webhook has answered
	// the re-create: the CCM's Delay alone is a race with this goroutine
	// on a loaded machine (it tore the LB down before the check once).
	release := s.HoldTeardown(client.ObjectKeyFromObject(old))
	defer release()
	if err := s.Kube.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if cur := get(t, ns, name); cur.DeletionTimestamp == nil {
		t.Fatal("the deleted Service is not Terminating: the CCM's finalizer is missing")
	}
	if ip, _ := s.Emu.IP(x); ip.Resource == nil {
		t.Fatal("X was detached before the re-create started")
	}
	// Any CREATE answered: this test is the only one creating now.
	answered, done := s.Creates(), make(chan struct{})
	defer close(done)
	go func() {
		defer release()
		for s.Creates() == answered {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	reasons := map[string]int{}
	start := time.Now()
	fixtures.Eventually(t, 30*time.Second, poll, "the re-create to succeed", func() bool {
		err := s.Kube.Create(ctx, fixtures.PrivateService(ns, name, ann))
		switch {
		case err == nil:
			return true
		case apierrors.IsAlreadyExists(err):
			reasons["AlreadyExists"]++
		case strings.Contains(err.Error(), "still held by the Load Balancer of the previous "+ns+"/"+name):
			reasons["still held"]++
		default:
			t.Fatalf("re-create: %v", err)
		}
		return false
	})
	t.Logf("re-created after %s; refusals seen by the client: %v", time.Since(start).Round(10*time.Millisecond), reasons)
	now := get(t, ns, name)
	t.Cleanup(func() { del(t, now) })
	if got := now.Annotations[ccm.AnnotationPrivateIPIDs]; got != x {
		t.Fatalf("re-created %s/%s got %s, want its previous %s", ns, name, got, x)
	}
	attachedTo(t, ns, name, x)
	if lb := get(t, ns, name).Annotations[ccm.AnnotationLoadBalancerID]; lb == old.Annotations[ccm.AnnotationLoadBalancerID] {
		t.Fatalf("the new Service is on the old Load Balancer %s", lb)
	}
}

// TestScenario14BringYourOwnRecreateWhileTerminating: the same replace with
// a bring-your-own IPAM ID: its claim names the Service, so the previous
// Load Balancer's hold is a retryable refusal, not "attached to lb_server".
func TestScenario14BringYourOwnRecreateWhileTerminating(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		id, err := s.Emu.AddIP(s.PNs["edge"].ID, netip.MustParseAddr("10.10.0.250"), []string{"reserved-by-terraform"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ann := map[string]string{request.AnnotationIPAMIDs: id}
		if err := s.Kube.Create(ctx, fixtures.PrivateService("payments", "byo-replaced", ann)); err != nil {
			t.Fatal(err)
		}
		attachedTo(t, "payments", "byo-replaced", id)
		replaceWhileTerminating(t, get(t, "payments", "byo-replaced"), id, ann)
	})
}

// routeTo sends the webhook's connections to rs only until restore, or
// the end of the test if it fails first: later scenarios see every replica.
func routeTo(t *testing.T, rs ...*testenv.Replica) (restore func()) {
	restore = s.RouteTo(rs...)
	t.Cleanup(restore)
	return restore
}

// listedSince reports whether r's index of dc-link was listed after t.
func listedSince(r *testenv.Replica, t time.Time) bool {
	age, ok := r.Gauge("scw_lb_ipam_index_age_seconds", "pool", "dc-link")
	return !ok || time.Duration(age*float64(time.Second)) < time.Since(t)
}

// TestScenario15RecreateOnTheReplicaThatDidNotBook: replica 0 books the
// Service's IP; the Service is deleted and re-created through replica 1,
// whose last listing of the pool predates that booking. Its reservation
// index has not seen the IP, but its Service cache showed it on the
// Service: the re-create gets it back (invariant 8 across replicas), with
// a re-read and no booking.
func TestScenario15RecreateOnTheReplicaThatDidNotBook(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		one, two := s.Replicas[0], s.Replicas[1]
		// Replica 1's background listing runs every minute: try again with
		// another name in the rare case it listed between the booking and
		// the re-create (then the index, not the cache, would find X).
		for attempt := range 3 {
			name := fmt.Sprintf("moved-%d", attempt)
			restore := routeTo(t, one)
			created1, created2 := one.Creates(), two.Creates()
			booked := time.Now()
			if err := s.Kube.Create(ctx, fixtures.PrivateService("payments", name, map[string]string{request.AnnotationPool: "dc-link"})); err != nil {
				restore()
				t.Fatal(err)
			}
			x := get(t, "payments", name).Annotations[ccm.AnnotationPrivateIPIDs]
			attachedTo(t, "payments", name, x)
			// A sweep between the delete and the re-create marks X
			// orphaned: used, it stays reusable for retention − margin
			// (4 s), pending only for the grace − margin (2 s).
			backfilled(t, get(t, "payments", name), x)
			// What the scenario is about: replica 1 learnt of X through its
			// Service cache, not through a listing. The cache lags the
			// apiserver by moments, by more on a loaded machine: the
			// re-create waits for it (when the re-create comes first, a
			// fresh IP is the documented answer).
			key := types.NamespacedName{Namespace: "payments", Name: name}
			fixtures.Eventually(t, 10*time.Second, poll, "replica 1 to see "+x+" through its Service cache", func() bool {
				return two.Remembers(key, x) || listedSince(two, booked)
			})
			seen := time.Since(booked)
			s.RouteTo(two)
			del(t, get(t, "payments", name))
			from := len(s.Emu.Requests())
			err := s.Kube.Create(ctx, fixtures.PrivateService("payments", name, map[string]string{request.AnnotationPool: "dc-link"}))
			calls := s.WebhookCalls(from)
			age, ok := two.Gauge("scw_lb_ipam_index_age_seconds", "pool", "dc-link")
			restore()
			if err != nil {
				t.Fatal(err)
			}
			now := get(t, "payments", name)
			t.Cleanup(func() { del(t, now) })
			if !ok || listedSince(two, booked) {
				t.Logf("attempt %d: replica 1 listed the pool after the booking (index age %.1fs); again", attempt, age)
				continue
			}
			if one.Creates() != created1+1 || two.Creates() != created2+1 {
				t.Fatalf("CREATEs answered: replica 0 %v, replica 1 %v; want one each", one.Creates()-created1, two.Creates()-created2)
			}
			t.Logf("re-created through replica 1 in %s after the booking (its cache showed it after %s); its index was %.1fs old",
				time.Since(booked).Round(time.Millisecond), seen.Round(time.Millisecond), age)
			if got := now.Annotations[ccm.AnnotationPrivateIPIDs]; got != x {
				t.Fatalf("re-created through replica 1: got %s, want %s back (calls %v)", got, x, calls)
			}
			// The sweeper (every second, on either replica) lists and reads
			// too: only "no booking, a re-read" is the admission's own.
			if calls[ipamtest.OpBookIP] != 0 || calls[ipamtest.OpGetIP] == 0 {
				t.Fatalf("the re-create's calls: %v, want a re-read and no booking", calls)
			}
			return
		}
		t.Fatal("replica 1 listed the pool between the booking and the re-create three times in a row")
	})
}
