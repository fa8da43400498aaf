package webhook

import (
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// owningGateway is Envoy Gateway's label with the owning Gateway's
// namespace.
const owningGateway = "gateway.envoyproxy.io/owning-gateway-namespace"

// gatewayService is a Service of namespace ns asking for pool dc-link,
// labelled with the Gateway namespace gatewayNS ("" for no label).
func gatewayService(ns, gatewayNS string) *corev1.Service {
	svc := fixtures.PrivateService(ns, "envoy-payments-edge-3c1f0a2b", ann(request.AnnotationPool, "dc-link"))
	if gatewayNS != "" {
		svc.Labels = map[string]string{owningGateway: gatewayNS}
	}
	return svc
}

// gatewayHarness is a harness whose pool file names Envoy Gateway's
// controller namespace, opted in, with its owning-namespace label.
func gatewayHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	if err := h.Kube.Create(t.Context(), fixtures.Namespace("envoy-gateway-system", true)); err != nil {
		t.Fatal(err)
	}
	h.alloc.Config().GatewayControllers = []ipam.GatewayController{{Namespace: "envoy-gateway-system", GatewayNamespaceLabel: owningGateway}}
	return h
}

// TestGatewayNamespace: a Service in a Gateway controller's namespace the
// pool file names is judged by its Gateway's namespace; without the label,
// or in a namespace the file does not name, by its own. Pool dc-link is for
// payments and edge-*.
func TestGatewayNamespace(t *testing.T) {
	tests := []struct {
		name       string
		svc        *corev1.Service
		want       expect
		unreserved bool // the sweeper's report of it, holding nothing
	}{
		{"a Gateway in a namespace the pool allows gets it through the controller's namespace",
			gatewayService("envoy-gateway-system", "payments"), reserved("dc-link", "172.16.35.200", "nodes", "dc"), true},
		{"a Gateway in a namespace the pool does not allow",
			gatewayService("envoy-gateway-system", "web"), denied(`pool "dc-link" is not allowed for namespace web; pools it may use: general, manual, drained, v6, dc-other`), false},
		{"the controller's namespace without the label is judged by its own",
			gatewayService("envoy-gateway-system", ""), denied(`pool "dc-link" is not allowed for namespace envoy-gateway-system`), false},
		{"a labelled Service in a namespace the pool file does not name is judged by its own",
			gatewayService("web", "payments"), denied(`pool "dc-link" is not allowed for namespace web`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := gatewayHarness(t)
			if got, what, err := h.unreserved(tt.svc); err != nil || got != tt.unreserved {
				t.Errorf("the sweeper reports it unreserved: %v %q (%v), want %v", got, what, err, tt.unreserved)
			}
			h.Srv.ResetCounts()
			r, status := h.send(review(admissionv1.Create, tt.svc, nil, false))
			if status != http.StatusOK {
				t.Fatalf("HTTP %d", status)
			}
			h.check(tt.name, r, tt.want)
		})
	}
}

// TestGatewayBringYourOwn: an IPAM ID a Gateway's Service brings is
// judged by the Gateway's namespace too: an IP of pool ephemeral (edge-*
// only, the one pool on its network) is the Gateway's of edge-eu, not one
// of web, through the same controller's namespace.
func TestGatewayBringYourOwn(t *testing.T) {
	for _, tt := range []struct {
		gatewayNS string
		want      string // "" for admitted, else what the denial says
	}{
		{"edge-eu", ""},
		{"web", "is not on the Private Network of a pool namespace web may use"},
	} {
		t.Run("a Gateway of "+tt.gatewayNS, func(t *testing.T) {
			h := gatewayHarness(t)
			id, _ := h.Srv.AddIP(h.PNs["tmp"].ID, mustAddr("10.50.0.77"), []string{"reserved-by-terraform"}, nil)
			svc := gatewayService("envoy-gateway-system", tt.gatewayNS)
			svc.Annotations = ann(request.AnnotationIPAMIDs, id)
			r, _ := h.send(review(admissionv1.Create, svc, nil, false))
			switch {
			case tt.want == "" && !r.Allowed:
				t.Fatalf("denied: %s", r.Result.Message)
			case tt.want != "" && (r.Allowed || !strings.Contains(r.Result.Message, tt.want)):
				t.Fatalf("allowed %v, %q; want a denial saying %q", r.Allowed, r.Result.Message, tt.want)
			}
		})
	}
}

// TestGatewayShare: a Gateway's Service counts in its Gateway's share of a
// pool, not the controller namespace's, and its reservation is tagged so.
func TestGatewayShare(t *testing.T) {
	h := gatewayHarness(t)
	cfg := h.alloc.Config()
	one := 1
	dc, _ := cfg.Pool("dc-link")
	dc.MaxPerNamespace = &one
	h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
	// payments holds its one address: its Gateway is refused.
	r, _ := h.send(review(admissionv1.Create, gatewayService("envoy-gateway-system", "payments"), nil, false))
	if r.Allowed || !strings.Contains(r.Result.Message, `namespace payments holds 1/1 addresses of pool "dc-link", all used by its live Services: api`) {
		t.Fatalf("a Gateway of payments past its share: allowed %v (%+v)", r.Allowed, r.Result)
	}
	// edge-eu's Gateway counts in edge-eu's share, whatever payments holds.
	edge := gatewayService("envoy-gateway-system", "edge-eu")
	edge.Name = "envoy-edge-eu-edge-7d2e1b0c"
	if r, _ = h.send(review(admissionv1.Create, edge, nil, false)); !r.Allowed {
		t.Fatal(r.Result.Message)
	}
	_, tags := h.ipByAddress("172.16.35.201")
	e, _ := ipam.ParseEntry(tags)
	if e.Namespace != "edge-eu" || e.Service.Namespace != "envoy-gateway-system" {
		t.Fatalf("the Gateway's reservation counts in %q for Service %s, want edge-eu", e.Namespace, e.Service)
	}
}

// TestGatewayOfANamespaceNotOptedIn: the pools of "every opted-in
// namespace" are not a Gateway's whose namespace has not opted in: its
// Service is left untouched, as one of that namespace would be, with a
// warning saying why; the sweeper does not report it unreserved.
func TestGatewayOfANamespaceNotOptedIn(t *testing.T) {
	h := gatewayHarness(t)
	svc := gatewayService("envoy-gateway-system", "plain")
	svc.Annotations = nil // the default pool, general, for every opted-in namespace
	if got, what, err := h.unreserved(svc); err != nil || got {
		t.Errorf("the sweeper reports it unreserved: %v %q (%v)", got, what, err)
	}
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, svc, nil, false))
	if !r.Allowed || len(r.Patch) != 0 || len(h.Srv.IPs()) != 0 {
		t.Fatalf("allowed %v, patch %s, %d IPs booked; want untouched", r.Allowed, r.Patch, len(h.Srv.IPs()))
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "namespace plain of its Gateway has not opted in") {
		t.Fatalf("warnings %q", r.Warnings)
	}
}

// TestGatewayNamespaceUnreadableIsRetried: a Gateway's namespace the cache
// does not hold and the apiserver cannot be asked about is a retryable
// refusal, never an admission left untouched (fail closed).
func TestGatewayNamespaceUnreadableIsRetried(t *testing.T) {
	h := gatewayHarness(t)
	h.mutator.NamespacesLive = failingReader{}
	r, _ := h.send(review(admissionv1.Create, gatewayService("envoy-gateway-system", "team-new"), nil, false))
	if r.Allowed || r.Result.Code != http.StatusTooManyRequests || !strings.Contains(r.Result.Message, "namespace team-new of the Service's Gateway cannot be read") {
		t.Fatalf("allowed %v, %+v; want a retryable refusal", r.Allowed, r.Result)
	}
}

// TestGatewayHoldingReservationsKeepsThem: a Gateway's Service admitted
// with reservations keeps them through a re-apply that drops them, whatever
// its Gateway namespace's label says now (installs that opted in the
// controller's namespace alone, before the rule).
func TestGatewayHoldingReservationsKeepsThem(t *testing.T) {
	h := gatewayHarness(t)
	live := h.created(gatewayService("envoy-gateway-system", "payments"))
	next := live.DeepCopy()
	next.Labels[owningGateway] = "plain"
	delete(next.Annotations, ccm.AnnotationPrivateIPIDs)
	r, _ := h.send(review(admissionv1.Update, next, live, false))
	if got := fixtures.Patched(t, next, r.Patch).Annotations[ccm.AnnotationPrivateIPIDs]; !r.Allowed || got != live.Annotations[ccm.AnnotationPrivateIPIDs] {
		t.Fatalf("allowed %v, private-ip-ids %q after the re-apply, want %q", r.Allowed, got, live.Annotations[ccm.AnnotationPrivateIPIDs])
	}
}
