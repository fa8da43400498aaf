package webhook

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestCCMWritesPassUntouched: the UPDATEs the CCM and the cloud-provider
// service controller make — adding and removing the cleanup finalizer and
// scw-loadbalancer-id — are allowed as they are, with no Scaleway call,
// whatever the Service's annotations (the apiserver hands the webhook the
// whole object after the CCM's merge patch, so the rows do the same).
func TestCCMWritesPassUntouched(t *testing.T) {
	untouched := expect{allowed: true}
	steps := []struct {
		name string
		edit func(*corev1.Service)
	}{
		{"finalizer added", func(s *corev1.Service) { s.Finalizers = append(s.Finalizers, ccm.FinalizerLoadBalancerCleanup) }},
		{"scw-loadbalancer-id added", func(s *corev1.Service) {
			s.Annotations[ccm.AnnotationLoadBalancerID] = "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa"
		}},
		{"scw-loadbalancer-id removed", func(s *corev1.Service) { delete(s.Annotations, ccm.AnnotationLoadBalancerID) }},
		{"finalizer removed", func(s *corev1.Service) {
			s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == ccm.FinalizerLoadBalancerCleanup })
		}},
	}
	for _, start := range []struct {
		name string
		make func(h *harness) *corev1.Service
	}{
		{"reserved Service", func(h *harness) *corev1.Service {
			return h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		}},
		// A default pool applies, but no IDs yet (admitted while the webhook
		// was down): allocating on the CCM's finalizer would race the CCM
		// creating the Load Balancer.
		{"unreserved Service", func(*harness) *corev1.Service { return fixtures.PrivateService("web", "api", nil) }},
		// Annotations that would be denied: the CCM must not be stuck.
		{"Service with a bad annotation", func(*harness) *corev1.Service {
			return fixtures.PrivateService("web", "api", ann(request.AnnotationPool, "NOT A POOL"))
		}},
	} {
		t.Run(start.name, func(t *testing.T) {
			h := newHarness(t)
			cur := start.make(h)
			h.events.take()
			for _, step := range steps {
				next := cur.DeepCopy()
				step.edit(next)
				h.Srv.ResetCounts()
				r, _ := h.send(review(admissionv1.Update, next, cur, false))
				h.check(step.name, r, untouched)
				cur = next
			}
			if ev := h.events.take(); len(ev) != 0 {
				t.Fatalf("events %v", ev)
			}
		})
	}
	t.Run("a user's change next to the CCM's is judged", func(t *testing.T) {
		h := newHarness(t)
		cur := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		next := cur.DeepCopy()
		next.Finalizers = []string{ccm.FinalizerLoadBalancerCleanup}
		next.Annotations[request.AnnotationPool] = "general"
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, cur, false))
		h.check("pool change", r, denied(`changing annotation scw-lb-ipam.io/pool from "dc-link" to "general"`))
	})
}

// TestExternallyManaged: a Load Balancer made outside Kubernetes may serve
// several Services, and the CCM applies private-ip-ids to it: a default
// pool never applies, an explicit request is denied with the reason.
func TestExternallyManaged(t *testing.T) {
	h := newHarness(t)
	ext := ann(ccm.AnnotationExternallyManaged, "true")
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "shared", ext), nil, false))
	h.check("default pool", r, expect{allowed: true})
	for _, tt := range []struct{ key, value string }{{request.AnnotationPool, "general"}, {request.AnnotationAddress, "10.10.0.9"}} {
		a := ann(ccm.AnnotationExternallyManaged, "true", tt.key, tt.value)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "shared", a), nil, false))
		h.check(tt.key, r, denied("annotation "+tt.key+`: value "`+tt.value+`": the Service uses an externally managed Load Balancer (service.beta.kubernetes.io/scw-loadbalancer-externally-managed: "true"), which several Services may share: its Private Network attachment is not this Service's to change`))
	}
}

// TestCCMContract: what the CCM will do or refuse is said at admission.
func TestCCMContract(t *testing.T) {
	public := "scw-lb-ipam: the Load Balancer also gets a public IP, as service.beta.kubernetes.io/scw-loadbalancer-private is not \"true\"; set it for a private-only Load Balancer"
	t.Run("public Load Balancer warned", func(t *testing.T) {
		h := newHarness(t)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", ann(ccm.AnnotationPrivate, "false")), nil, false))
		want := reserved("general", "10.10.0.2", "nodes", "edge")
		inner := want.warnings
		want.warnings = func(h *harness) []string { return append(inner(h), public) }
		want.ops = nil
		if !r.Allowed || !slices.Equal(r.Warnings, want.warnings(h)) {
			t.Fatalf("warnings %q, want %q", r.Warnings, want.warnings(h))
		}
	})
	t.Run("pn-ids without the nodes' network warned", func(t *testing.T) {
		h := newHarness(t)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", ann(ccm.AnnotationPNIDs, h.PNs["lab"].ID)), nil, false))
		if !r.Allowed || len(r.Warnings) != 2 || !strings.HasPrefix(r.Warnings[1], "scw-lb-ipam: service.beta.kubernetes.io/scw-loadbalancer-pn-ids lists Private Networks without the nodes' network "+h.PNs["nodes"].ID) {
			t.Fatalf("warnings %q", r.Warnings)
		}
	})
	t.Run("the DHCP address on the nodes' network is told in the Event", func(t *testing.T) {
		h := newHarness(t)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", nil), nil, false))
		notes := h.events.takeNotes()
		if !r.Allowed || len(notes) != 1 || !strings.Contains(notes[0], "the Load Balancer also gets a DHCP address on the nodes' Private Network "+h.PNs["nodes"].ID+", to reach the backends: the reserved address is the one in scw-lb-ipam.io/addresses (10.10.0.2)") {
			t.Fatalf("notes %q", notes)
		}
	})
	t.Run("pn-ids naming a missing Private Network denied", func(t *testing.T) {
		h := newHarness(t)
		missing := "0d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", ann(ccm.AnnotationPNIDs, h.PNs["nodes"].ID+","+missing)), nil, false))
		h.check("missing PN", r, denied("annotation service.beta.kubernetes.io/scw-loadbalancer-pn-ids", "Private Network "+missing+" does not exist in region fr-par, so the CCM could not attach the Load Balancer to it"))
		if n := h.Srv.Count(emulator.OpGetPrivateNetwork); n != 1 || len(h.Srv.IPs()) != 0 {
			t.Fatalf("%d GetPrivateNetwork, %d IPs booked", n, len(h.Srv.IPs()))
		}
	})
	// With translation on, it is read as an address (TestCreateInOtherWords).
	t.Run("spec.loadBalancerIP on a private Load Balancer denied, translation off", func(t *testing.T) {
		h := newHarness(t)
		off := false
		h.alloc.Config().TranslateRequests = &off
		svc := fixtures.PrivateService("web", "api", nil)
		svc.Spec.LoadBalancerIP = "10.10.0.9"
		r, _ := h.send(review(admissionv1.Create, svc, nil, false))
		h.check("loadBalancerIP", r, denied(`spec.loadBalancerIP 10.10.0.9: the CCM refuses spec.loadBalancerIP on a private Load Balancer (service.beta.kubernetes.io/scw-loadbalancer-private: "true"); remove it and set annotation scw-lb-ipam.io/address: "10.10.0.9"`))
	})
	// The same rule on an UPDATE that keeps the reservation: a re-apply
	// that puts spec.loadBalancerIP back would have the CCM refuse every
	// later sync of the Service.
	t.Run("spec.loadBalancerIP put back on an UPDATE denied, translation off", func(t *testing.T) {
		h := newHarness(t)
		off := false
		h.alloc.Config().TranslateRequests = &off
		live := h.created(fixtures.PrivateService("web", "api", ann(ccm.AnnotationPrivate, "True")))
		next := live.DeepCopy()
		next.Spec.LoadBalancerIP = live.Annotations[request.AnnotationAddresses]
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		h.check("loadBalancerIP on UPDATE", r, denied(`spec.loadBalancerIP 10.10.0.2: the CCM refuses spec.loadBalancerIP on a private Load Balancer`))
		if n := h.Srv.Counts(); len(n) != 0 {
			t.Fatalf("Scaleway calls %v", n)
		}
	})
}

// TestCreateDropsARestoredLoadBalancerID: a CREATE carrying the CCM's
// scw-loadbalancer-id (a manifest saved with kubectl get -o yaml, a Velero
// restore) names a Load Balancer of an earlier Service: the CCM would take
// it for this one's, and once it is gone its delete path answers "not
// found" and lets the Service go while the Load Balancer it made for the
// new Service stays. The annotation is dropped with a warning; an
// externally managed Load Balancer's is the user's and stays.
func TestCreateDropsARestoredLoadBalancerID(t *testing.T) {
	const stale = "fr-par-1/0b6c2f1e-4d3a-4c5b-8e9f-1a2b3c4d5e6f"
	for _, tt := range []struct {
		name string
		ann  map[string]string
		drop bool
	}{
		{"saved with its addresses", ann(request.AnnotationPool, "dc-link", request.AnnotationAddresses, "172.16.35.200", ccm.AnnotationLoadBalancerID, stale), true},
		{"saved with the CCM's finalizer", ann("team", "a", ccm.AnnotationLoadBalancerID, stale), true},
		{"set by the user on a new Service: the CCM adopts that Load Balancer", ann(request.AnnotationPool, "dc-link", ccm.AnnotationLoadBalancerID, stale), false},
		{"externally managed", ann(ccm.AnnotationExternallyManaged, "true", request.AnnotationAddresses, "10.10.0.9", ccm.AnnotationLoadBalancerID, stale), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			ns := "payments"
			if tt.ann[request.AnnotationPool] == "" {
				ns = "web"
			}
			svc := fixtures.PrivateService(ns, "restored", tt.ann)
			if tt.ann["team"] != "" {
				svc.Finalizers = []string{ccm.FinalizerLoadBalancerCleanup}
			}
			r, _ := h.send(review(admissionv1.Create, svc, nil, false))
			if !r.Allowed {
				t.Fatal(r.Result.Message)
			}
			got := fixtures.Patched(t, svc, r.Patch)
			_, kept := got.Annotations[ccm.AnnotationLoadBalancerID]
			warned := slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, ccm.AnnotationLoadBalancerID+" is dropped") })
			if kept == tt.drop || warned != tt.drop {
				t.Fatalf("annotation kept %v, warned %v (%q); want dropped %v", kept, warned, r.Warnings, tt.drop)
			}
		})
	}
	// An UPDATE is the CCM's own write: untouched.
	h := newHarness(t)
	live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
	next := live.DeepCopy()
	next.Annotations[ccm.AnnotationLoadBalancerID] = stale
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Update, next, live, false))
	h.check("the CCM's write", r, expect{allowed: true})
}

// TestCCMBooleansReadAsTheCCMReadsThem: the CCM reads its private
// annotation with strconv.ParseBool, so "True" and "1" make a private Load
// Balancer: spec.loadBalancerIP is refused there as for "true", and no
// warning says it gets a public IP.
func TestCCMBooleansReadAsTheCCMReadsThem(t *testing.T) {
	for _, v := range []string{"True", "1", "t"} {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			off := false
			h.alloc.Config().TranslateRequests = &off
			svc := fixtures.Service("web", "api", ann(ccm.AnnotationPrivate, v))
			svc.Spec.LoadBalancerIP = "10.10.0.9"
			if r, _ := h.send(review(admissionv1.Create, svc, nil, false)); r.Allowed {
				t.Fatalf("private %q: spec.loadBalancerIP admitted", v)
			}
			r, _ := h.send(review(admissionv1.Create, fixtures.Service("web", "api", ann(ccm.AnnotationPrivate, v)), nil, false))
			for _, w := range r.Warnings {
				if strings.Contains(w, "also gets a public IP") {
					t.Fatalf("private %q: warned %q", v, w)
				}
			}
		})
	}
}
