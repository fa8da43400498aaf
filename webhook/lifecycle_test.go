package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// The rows below are the lifecycles of real clusters that the admission
// rules must survive: each names the finding it covers.

// withLB is svc as the CCM leaves it once its Load Balancer exists, by one
// of the three marks the CCM writes.
func withLB(svc *corev1.Service, mark string) *corev1.Service {
	svc = svc.DeepCopy()
	switch mark {
	case "ingress":
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.10.0.77"}}
	case "lb-id":
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[ccm.AnnotationLoadBalancerID] = "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa"
	case "finalizer":
		svc.Finalizers = append(svc.Finalizers, ccm.FinalizerLoadBalancerCleanup)
	}
	return svc
}

// Finding 1: a Service whose Load Balancer exists with a DHCP address and no
// private-ip-ids (created before its namespace opted in, let through by
// failurePolicy Ignore, or a default pool added later) keeps its address on
// any UPDATE without allow-ip-change: no IPAM call, a warning and an Event.
func TestLiveLoadBalancerKeepsItsAddress(t *testing.T) {
	kept := func(pool string) expect {
		return expect{allowed: true, warnings: func(*harness) []string {
			return []string{"scw-lb-ipam: Service web/api already has a Load Balancer with a DHCP address and no reserved IP; it keeps that address and nothing was reserved. To move it to a reserved IP (pool " + pool + `), set annotation scw-lb-ipam.io/allow-ip-change: "true" (the CCM re-attaches the Load Balancer: a brief outage)`}
		}}
	}
	for _, mark := range []string{"ingress", "lb-id", "finalizer"} {
		t.Run("label change, LB known by its "+mark, func(t *testing.T) {
			h := newHarness(t)
			old := withLB(fixtures.PrivateService("web", "api", nil), mark)
			next := old.DeepCopy()
			next.Labels = map[string]string{"team": "edge"}
			r, _ := h.send(review(admissionv1.Update, next, old, false))
			h.check("label change", r, kept("general"))
			if ev := h.events.take(); !slices.Equal(ev, []string{"Warning IPNotReserved web/api"}) {
				t.Fatalf("events %v", ev)
			}
		})
	}
	t.Run("helm upgrade adds a pool annotation", func(t *testing.T) {
		h := newHarness(t)
		old := withLB(fixtures.PrivateService("web", "api", nil), "ingress")
		next := fixtures.PrivateService("web", "api", ann(request.AnnotationPool, "general"))
		r, _ := h.send(review(admissionv1.Update, next, old, false))
		h.check("full update", r, kept("general"))
	})
	t.Run("its own pn-ids of 8 networks: kept, not refused for the pool's ninth", func(t *testing.T) {
		h := newHarness(t)
		eight := []string{h.PNs["nodes"].ID}
		for i := 1; i <= 7; i++ {
			eight = append(eight, fmt.Sprintf("5555555%d-5555-4555-8555-555555555555", i))
		}
		old := withLB(fixtures.PrivateService("web", "api", ann(ccm.AnnotationPNIDs, strings.Join(eight, ","))), "ingress")
		next := old.DeepCopy()
		next.Labels = map[string]string{"team": "edge"}
		r, _ := h.send(review(admissionv1.Update, next, old, false))
		h.check("label change", r, kept("general"))
	})
	t.Run("dry run warns and records nothing", func(t *testing.T) {
		h := newHarness(t)
		old := withLB(fixtures.PrivateService("web", "api", nil), "ingress")
		r, _ := h.send(review(admissionv1.Update, old.DeepCopy(), old, true))
		h.check("dry run", r, kept("general"))
		if ev := h.events.take(); len(ev) != 0 {
			t.Fatalf("a dry run recorded %v", ev)
		}
	})
	t.Run("hand-written private-ip-ids denied", func(t *testing.T) {
		h := newHarness(t)
		old := withLB(fixtures.PrivateService("web", "api", nil), "lb-id")
		next := old.DeepCopy()
		next.Annotations[ccm.AnnotationPrivateIPIDs] = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
		r, _ := h.send(review(admissionv1.Update, next, old, false))
		h.check("raw ids", r, denied("adding annotation service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids to a Service whose Load Balancer already exists", `set annotation scw-lb-ipam.io/allow-ip-change: "true"`))
	})
	t.Run("allow-ip-change moves it to a reserved IP", func(t *testing.T) {
		h := newHarness(t)
		old := withLB(fixtures.PrivateService("web", "api", nil), "ingress")
		next := old.DeepCopy()
		next.Annotations[request.AnnotationAllowIPChange] = "true"
		r, _ := h.send(review(admissionv1.Update, next, old, false))
		h.check("allowed", r, reserved("general", "10.10.0.2", "nodes", "edge"))
	})
	// Review finding: LoadBalancer → ClusterIP → LoadBalancer before the
	// CCM tore the old Load Balancer down (its finalizer and LB ID still
	// on the object): the CCM may re-use that Load Balancer, so the guard
	// holds although the old object is a ClusterIP.
	for _, mark := range []string{"lb-id", "finalizer"} {
		t.Run("back to LoadBalancer while the old one's "+mark+" is there", func(t *testing.T) {
			h := newHarness(t)
			old := withLB(fixtures.PrivateService("web", "api", nil), mark)
			old.Spec.Type = corev1.ServiceTypeClusterIP
			next := withLB(fixtures.PrivateService("web", "api", nil), mark)
			r, _ := h.send(review(admissionv1.Update, next, old, false))
			h.check("type flip", r, kept("general"))
		})
	}
	t.Run("no Load Balancer yet: allocates", func(t *testing.T) {
		h := newHarness(t)
		old := fixtures.PrivateService("web", "api", ann("team", "edge"))
		r, _ := h.send(review(admissionv1.Update, old.DeepCopy(), old, false))
		h.check("no LB", r, reserved("general", "10.10.0.2", "nodes", "edge"))
	})
}

// retain tags an IP as the sweeper leaves it once its Service is gone:
// uid back-filled (a live Service used it), orphaned since ago.
func (h *harness) retain(id string, uid string, ago time.Duration) {
	h.T.Helper()
	ip, err := h.Cloud.GetIP(context.Background(), id)
	if err != nil {
		h.T.Fatal(err)
	}
	e, _ := ipam.ParseEntry(ip.Tags)
	e.UID, e.OrphanedSince = uid, time.Now().Add(-ago).Truncate(time.Second)
	if _, err := h.Cloud.SetTags(context.Background(), id, e.Tags()); err != nil {
		h.T.Fatal(err)
	}
}

func (h *harness) orphanedSince(id string) time.Time {
	h.T.Helper()
	ip, err := h.Cloud.GetIP(context.Background(), id)
	if err != nil {
		h.T.Fatal(err)
	}
	e, _ := ipam.ParseEntry(ip.Tags)
	return e.OrphanedSince
}

// reused is the outcome of taking back the reservation at addr.
func reused(pool, addr, calls string, pns ...string) expect {
	return expect{allowed: true, calls: calls,
		ops: func(h *harness) []jsonpatch.Operation {
			id, _ := h.ipByAddress(addr)
			return addOps(id, h.pnList(pns...), addr)
		},
		warnings: func(h *harness) []string {
			id, _ := h.ipByAddress(addr)
			return []string{fmt.Sprintf("scw-lb-ipam: reused %s (IPAM ID %s) from pool %s, retained for this Service", addr, id, pool)}
		}}
}

// Finding 2: helm --force / an Argo CD replace deletes api; the CCM's
// finalizer keeps it Terminating with its IP X attached; a CREATE attempt
// in between booked Y. The re-created api must end with X.
func TestRecreateGetsTheAddressItHad(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
	x := live.Annotations[ccm.AnnotationPrivateIPIDs]
	h.retain(x, "uid-of-the-first-api", 0) // the sweeper back-filled its uid...
	ip, _ := h.Cloud.GetIP(ctx, x)
	e, _ := ipam.ParseEntry(ip.Tags)
	e.OrphanedSince = time.Time{} // ...while it was live
	if _, err := h.Cloud.SetTags(ctx, x, e.Tags()); err != nil {
		t.Fatal(err)
	}
	if err := h.Srv.Attach(x, emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "payments-api"}); err != nil {
		t.Fatal(err)
	}
	// A pending reservation of the same Service, booked later (a CREATE
	// whose answer was lost, or refused after our admission).
	if _, err := h.Srv.AddIP(h.PNs["dc"].ID, mustAddr("172.16.35.201"), ipam.Entry{Cluster: "test", Pool: "dc-link", Service: client.ObjectKeyFromObject(live)}.Tags(), nil); err != nil {
		t.Fatal(err)
	}

	// Still live in the cache (not Terminating): the apiserver would refuse
	// the CREATE; say so instead of asking to retry.
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), nil, false))
	h.check("exists", r, expect{allowed: false, code: 409, calls: "GetIP=1",
		message: []string{"Service payments/api already exists and holds address 172.16.35.200"}})

	// Terminating, held by the CCM's finalizer, X still attached: retry.
	if err := h.Kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
		t.Fatal(err)
	}
	live.Finalizers = []string{ccm.FinalizerLoadBalancerCleanup}
	if err := h.Kube.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := h.Kube.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	h.Srv.ResetCounts()
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), nil, false))
	h.check("terminating", r, retry("GetIP=1", "address 172.16.35.200 (IPAM ID "+x+") is still held by the Load Balancer of the previous payments/api", "retry in a moment"))
	if n := len(h.Srv.IPs()); n != 2 {
		t.Fatalf("%d IPs: a retryable refusal booked something", n)
	}

	// The LB is gone and the sweeper orphaned X; the cache still shows the
	// old object live (it lags): a same-name reference does not block.
	if err := h.Srv.Detach(x); err != nil {
		t.Fatal(err)
	}
	h.retain(x, "uid-of-the-first-api", time.Minute)
	if err := h.Kube.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
		t.Fatal(err)
	}
	live.Finalizers = nil
	if err := h.Kube.Update(ctx, live); err != nil { // the CCM lets go: gone
		t.Fatal(err)
	}
	lagging := fixtures.PrivateService("payments", "api", live.Annotations)
	if err := h.Kube.Create(ctx, lagging); err != nil {
		t.Fatal(err)
	}
	h.Srv.ResetCounts()
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), nil, false))
	h.check("re-created", r, reused("dc-link", "172.16.35.200", "GetIP=1 UpdateIP=1", "nodes", "dc"))
	if !h.orphanedSince(x).IsZero() {
		t.Fatal("orphaned-since not cleared: the sweeper could release X under the new Service")
	}
}

// Finding 4: a restored or GitOps-applied manifest that carries its old
// private-ip-ids takes its reservation back under the reuse rules, and gets
// a fresh address when that reservation is gone or being released.
func TestRestoredManifest(t *testing.T) {
	restored := func(h *harness) (*corev1.Service, string) {
		live := h.created(fixtures.PrivateService("web", "api", nil))
		id := live.Annotations[ccm.AnnotationPrivateIPIDs]
		if err := h.Kube.Delete(context.Background(), live); err != nil {
			h.T.Fatal(err)
		}
		return fixtures.PrivateService("web", "api", ann(ccm.AnnotationPrivateIPIDs, id, ccm.AnnotationPNIDs, live.Annotations[ccm.AnnotationPNIDs],
			request.AnnotationAddresses, live.Annotations[request.AnnotationAddresses])), id
	}
	t.Run("retained: taken back", func(t *testing.T) {
		h := newHarness(t)
		svc, id := restored(h)
		h.retain(id, "uid-1", time.Hour)
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Create, svc, nil, false))
		h.check("retained", r, expect{allowed: true, calls: "GetIP=1 UpdateIP=1", warnings: func(*harness) []string {
			return []string{"scw-lb-ipam: reused 10.10.0.2 (IPAM ID " + id + ") from pool general, retained for this Service"}
		}})
		if !h.orphanedSince(id).IsZero() {
			t.Fatal("orphaned-since left set: the sweeper may release it under the live Service")
		}
	})
	fresh := expect{allowed: true, calls: "BookIP=1 GetIP=1",
		ops: func(h *harness) []jsonpatch.Operation {
			id, _ := h.ipByAddress("10.10.0.3")
			ops := addOps(id, h.pnList("nodes", "edge"), "10.10.0.3")
			return []jsonpatch.Operation{{Operation: "replace", Path: ops[0].Path, Value: ops[0].Value}, {Operation: "replace", Path: ops[2].Path, Value: ops[2].Value}}
		},
		warnings: func(h *harness) []string {
			id, _ := h.ipByAddress("10.10.0.3")
			return []string{"scw-lb-ipam: reserved 10.10.0.3 (IPAM ID " + id + ") from pool general"}
		}}
	t.Run("released: a fresh address", func(t *testing.T) {
		h := newHarness(t)
		svc, id := restored(h)
		// The earlier reservation went (released), and 10.10.0.2 with it;
		// keep .2 taken so the fresh one is told apart.
		if err := h.Cloud.ReleaseIP(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Srv.AddIP(h.PNs["edge"].ID, mustAddr("10.10.0.2"), nil, nil); err != nil {
			t.Fatal(err)
		}
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Create, svc, nil, false))
		h.check("released", r, fresh)
	})
	t.Run("inside the release margin: a fresh address", func(t *testing.T) {
		h := newHarness(t)
		svc, id := restored(h)
		h.retain(id, "uid-1", 24*time.Hour-10*time.Second) // released in 10 s, margin 20 s
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Create, svc, nil, false))
		h.check("releasing", r, fresh)
		if h.orphanedSince(id).IsZero() {
			t.Fatal("a reservation inside the margin was taken back")
		}
	})
}

// Finding 6: what the caches cannot answer is a retryable refusal, never an
// admission without a reservation.
func TestFailClosed(t *testing.T) {
	t.Run("namespace unreadable", func(t *testing.T) {
		h := newHarness(t)
		h.mutator.Namespaces = failingReader{h.Kube}
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", nil), nil, false))
		h.check("namespace", r, retry("", "namespace web cannot be read from the cache of scw-lb-ipam right now", "nothing was reserved, apply again in a moment"))
	})
	t.Run("Service cache unreadable", func(t *testing.T) {
		h := newHarness(t)
		h.created(fixtures.PrivateService("web", "api", nil)) // a reservation to look at
		cfg := h.alloc.Config()
		h.alloc = fixtures.Must(allocator.New(allocator.Options{Cloud: h.Cloud, Config: cfg, References: fixtures.Records(failingReader{h.Kube}), Claims: allocator.NoClaims{}}))
		h.mutator.Allocator = h.alloc
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", nil), nil, false))
		h.check("services", r, retry("ListIPs=1", "the Service cache of scw-lb-ipam cannot tell which Services use this IP right now"))
	})
}

type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("timed out waiting for the cache to sync")
}

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("timed out waiting for the cache to sync")
}

// Finding 7: a dry run writes nothing anywhere, Events included.
func TestDryRunRecordsNothing(t *testing.T) {
	h := newHarness(t)
	attached, _ := h.Srv.AddIP(h.PNs["edge"].ID, mustAddr("10.10.0.78"), nil, &emulator.Resource{Type: "lb_server", ID: "lb-9", Name: "legacy-lb"})
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", ann(request.AnnotationIPAMIDs, attached)), nil, true))
	h.check("dry run", r, func() expect {
		e := denied("IPAM IP " + attached + " (10.10.0.78) is attached to lb_server legacy-lb")
		e.calls = "GetIP=1"
		return e
	}())
	if ev := h.events.take(); len(ev) != 0 {
		t.Fatalf("a dry run recorded %v", ev)
	}
}

// Finding 8: retention 0 means no stickiness: a re-created Service gets a
// fresh address, its old reservation is left to the sweeper.
func TestRetentionZeroIsNotSticky(t *testing.T) {
	h := newHarness(t)
	live := h.created(fixtures.PrivateService("edge-eu", "api", ann(request.AnnotationPool, "ephemeral")))
	id := live.Annotations[ccm.AnnotationPrivateIPIDs]
	if err := h.Kube.Delete(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	h.retain(id, "uid-1", time.Second)
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("edge-eu", "api", ann(request.AnnotationPool, "ephemeral")), nil, false))
	// The sweeper's orphaned-since is not in this replica's index yet: one
	// re-read rules the old reservation out.
	want := reserved("ephemeral", "10.50.0.3", "nodes", "tmp")
	want.calls = "BookIP=1 GetIP=1"
	h.check("re-created", r, want)
}
