package webhook

import (
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

const (
	dnsHostname       = "external-dns.kubernetes.io/hostname"
	dnsTarget         = "external-dns.kubernetes.io/target"
	dnsHostnameLegacy = "external-dns.alpha.kubernetes.io/hostname"
	dnsTargetLegacy   = "external-dns.alpha.kubernetes.io/target"
)

// withTarget is reserved(pool dc-link, addr) with external-dns's target
// added under key.
func withTarget(key, addr string) expect {
	e := reserved("dc-link", addr, "nodes", "dc")
	ops := e.ops
	e.ops = func(h *harness) []jsonpatch.Operation {
		return append([]jsonpatch.Operation{{Operation: "add", Path: "/metadata/annotations/" + pointerEscape.Replace(key), Value: addr}}, ops(h)...)
	}
	return e
}

// TestCreateDNSTarget: a Service that asks external-dns for a name gets the
// reserved address as its target, under its hostname annotation's prefix.
func TestCreateDNSTarget(t *testing.T) {
	svc := func(kv ...string) *corev1.Service {
		return fixtures.PrivateService("payments", "api", ann(append([]string{request.AnnotationPool, "dc-link"}, kv...)...))
	}
	tests := []struct {
		name   string
		svc    *corev1.Service
		dnsOff bool
		want   expect
	}{
		{"external-dns v0.22's prefix", svc(dnsHostname, "api.dc.example"), false, withTarget(dnsTarget, "172.16.35.200")},
		{"the older prefix", svc(dnsHostnameLegacy, "api.dc.example"), false, withTarget(dnsTargetLegacy, "172.16.35.200")},
		{"the user's target stays", svc(dnsHostnameLegacy, "api.dc.example", dnsTargetLegacy, "lb.dc.example"), false, reserved("dc-link", "172.16.35.200", "nodes", "dc")},
		{"no hostname, no target", svc(), false, reserved("dc-link", "172.16.35.200", "nodes", "dc")},
		{"the pool file turns it off", svc(dnsHostname, "api.dc.example"), true, reserved("dc-link", "172.16.35.200", "nodes", "dc")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.dnsOff {
				off := false
				h.alloc.Config().DNSTarget = &off
			}
			h.Srv.ResetCounts()
			r, _ := h.send(review(admissionv1.Create, tt.svc, nil, false))
			h.check(tt.name, r, tt.want)
		})
	}
}

// TestReapplyKeepsDNSTarget: a re-apply that drops the target gets it back,
// as pn-ids; one that sets the user's own keeps theirs.
func TestReapplyKeepsDNSTarget(t *testing.T) {
	manifest := ann(request.AnnotationPool, "dc-link", dnsHostnameLegacy, "api.dc.example")
	for name, tt := range map[string]struct {
		next func(live *corev1.Service) *corev1.Service
		ops  []jsonpatch.Operation
	}{
		"dropped, put back": {func(live *corev1.Service) *corev1.Service {
			next := live.DeepCopy()
			delete(next.Annotations, dnsTargetLegacy)
			return next
		}, []jsonpatch.Operation{{Operation: "add", Path: "/metadata/annotations/" + pointerEscape.Replace(dnsTargetLegacy), Value: "172.16.35.200"}}},
		"the user's own target": {func(live *corev1.Service) *corev1.Service {
			return reapplied(live, ann(dnsTargetLegacy, "lb.dc.example"))
		}, nil},
		"unchanged": {func(live *corev1.Service) *corev1.Service { return live.DeepCopy() }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			live := h.created(fixtures.PrivateService("payments", "api", manifest))
			if got := live.Annotations[dnsTargetLegacy]; got != "172.16.35.200" {
				t.Fatalf("created with target %q", got)
			}
			h.Srv.ResetCounts()
			r, _ := h.send(review(admissionv1.Update, tt.next(live), live, false))
			h.check(name, r, expect{allowed: true, ops: func(*harness) []jsonpatch.Operation { return tt.ops }})
		})
	}
}

// TestMovedServiceDNSTarget: a Service moved to another address (with
// allow-ip-change) gets the new address as its target, not the old one it
// carries.
func TestMovedServiceDNSTarget(t *testing.T) {
	h := newHarness(t)
	live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "172.16.35.201", dnsHostname, "api.dc.example")))
	next := reapplied(live, ann(request.AnnotationAddress, "172.16.35.202", request.AnnotationAllowIPChange, "true"))
	r, _ := h.send(review(admissionv1.Update, next, live, false))
	if !r.Allowed {
		t.Fatal(r.Result.Message)
	}
	if got := fixtures.Patched(t, next, r.Patch).Annotations[dnsTarget]; got != "172.16.35.202" {
		t.Fatalf("target %q after the move, want 172.16.35.202", got)
	}
}

// TestPublicLoadBalancerKeepsItsName: the CCM lists a public Load
// Balancer's public IPs in its status (createPublicServiceStatus), so
// external-dns publishes them; a target naming the reserved private address
// would move the public name to it. Private is read as the CCM reads it
// (strconv.ParseBool), and use-hostname makes the status list a hostname.
func TestPublicLoadBalancerKeepsItsName(t *testing.T) {
	const private, useHostname = "service.beta.kubernetes.io/scw-loadbalancer-private", "service.beta.kubernetes.io/scw-loadbalancer-use-hostname"
	for _, tt := range []struct {
		name       string
		ann        map[string]string
		wantTarget string
	}{
		{"public", ann(dnsHostname, "api.example.com"), ""},
		{"private false", ann(private, "false", dnsHostname, "api.example.com"), ""},
		{"private True, as the CCM reads it", ann(private, "True", dnsHostname, "api.dc.example"), "172.16.35.200"},
		{"private 1, as the CCM reads it", ann(private, "1", dnsHostname, "api.dc.example"), "172.16.35.200"},
		{"private with use-hostname", ann(private, "true", useHostname, "true", dnsHostname, "api.dc.example"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			svc := fixtures.Service("payments", "api", tt.ann)
			svc.Annotations[request.AnnotationPool] = "dc-link"
			live := h.created(svc)
			if got := live.Annotations[dnsTarget]; got != tt.wantTarget {
				t.Fatalf("target %q, want %q", got, tt.wantTarget)
			}
		})
	}
}

// TestReapplyOfPublicLoadBalancerDropsTarget: a public Service reserved
// before the rule (a target the webhook wrote, naming its reserved
// address) loses that target on its next re-apply, and one without a
// target does not get one; a target of the user's stays.
func TestReapplyOfPublicLoadBalancerDropsTarget(t *testing.T) {
	for name, tt := range map[string]struct {
		target string // on the live object
		want   []jsonpatch.Operation
	}{
		"the webhook's target is removed": {"172.16.35.200", []jsonpatch.Operation{{Operation: "remove", Path: "/metadata/annotations/" + pointerEscape.Replace(dnsTarget)}}},
		"no target, none added":           {"", nil},
		"the user's target stays":         {"lb.example.com", nil},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			live := h.created(fixtures.Service("payments", "api", ann(request.AnnotationPool, "dc-link", dnsHostname, "api.example.com")))
			delete(live.Annotations, dnsTarget)
			if tt.target != "" {
				live.Annotations[dnsTarget] = tt.target
			}
			h.Srv.ResetCounts()
			r, _ := h.send(review(admissionv1.Update, live.DeepCopy(), live, false))
			h.check(name, r, expect{allowed: true, ops: func(*harness) []jsonpatch.Operation { return tt.want }})
		})
	}
}

// TestMoveFollowsTargetWhateverTheSwitch: with dnsTarget turned off after
// the target was written, a move with allow-ip-change must not leave the
// target naming the address it gives up (later handed to another Service):
// the webhook's own target is removed; with the switch on, it follows.
func TestMoveFollowsTargetWhateverTheSwitch(t *testing.T) {
	for name, tt := range map[string]struct {
		off  bool
		want string
	}{"switched off: removed": {true, ""}, "on: follows": {false, "172.16.35.202"}} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "172.16.35.201", dnsHostname, "api.dc.example")))
			if got := live.Annotations[dnsTarget]; got != "172.16.35.201" {
				t.Fatalf("created with target %q", got)
			}
			if tt.off {
				off := false
				h.alloc.Config().DNSTarget = &off
			}
			next := reapplied(live, ann(request.AnnotationAddress, "172.16.35.202", request.AnnotationAllowIPChange, "true"))
			r, _ := h.send(review(admissionv1.Update, next, live, false))
			if !r.Allowed {
				t.Fatal(r.Result.Message)
			}
			got, set := fixtures.Patched(t, next, r.Patch).Annotations[dnsTarget]
			if got != tt.want || set != (tt.want != "") {
				t.Fatalf("target %q (set %v) after the move, want %q", got, set, tt.want)
			}
		})
	}
}
