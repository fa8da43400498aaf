package webhook

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// everyAnnotation is a request using every annotation the webhook reads.
func everyAnnotation(ids string) map[string]string {
	return ann(request.AnnotationPool, "dc-link,general", request.AnnotationAddress, "172.16.35.200", request.AnnotationIPAMIDs, ids,
		ccm.AnnotationPrivateIPIDs, ids, request.AnnotationAllowIPChange, "true", ccm.AnnotationPNIDs, "not-even-an-id")
}

// TestSecurityScope: namespaces without the label, kube-system and the
// release namespace are never modified, whatever the Service asks, and the
// webhook makes no Scaleway call for them. A namespace the cache does not
// know is refused (retryable), never admitted unreserved: the apiserver's
// namespaceSelector matched it, so the cache is what lags.
func TestSecurityScope(t *testing.T) {
	h := newHarness(t)
	id, _ := h.Srv.AddIP(h.PNs["edge"].ID, mustAddr("10.10.0.50"), nil, nil)
	for _, ns := range []string{"plain", "kube-system", "scw-lb-ipam", "no-such-namespace"} {
		h.Srv.ResetCounts()
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
			svc := fixtures.PrivateService(ns, "x", everyAnnotation(id))
			var old = svc.DeepCopy()
			if op == admissionv1.Create {
				old = nil
			}
			r, _ := h.send(review(op, svc, old, false))
			if ns == "no-such-namespace" {
				if r.Allowed || r.Result.Code != 429 || r.Result.Details == nil || r.Result.Details.RetryAfterSeconds != 2 ||
					!strings.Contains(r.Result.Message, "namespace no-such-namespace cannot be read") || len(r.Patch) != 0 {
					t.Errorf("%s %s: allowed=%v result=%+v patch=%s", ns, op, r.Allowed, r.Result, r.Patch)
				}
				continue
			}
			if !r.Allowed || len(r.Patch) != 0 || len(r.Warnings) != 0 {
				t.Errorf("%s %s: allowed=%v patch=%s warnings=%v", ns, op, r.Allowed, r.Patch, r.Warnings)
			}
		}
		if c := h.calls(); c != "" {
			t.Errorf("%s: Scaleway calls %s", ns, c)
		}
	}
}

// TestSecurityTheft: every way to take an IP that is not yours is denied,
// and nothing is booked or re-tagged on the way.
func TestSecurityTheft(t *testing.T) {
	h := newHarness(t)
	victim := h.created(fixtures.PrivateService("payments", "victim", ann(request.AnnotationPool, "dc-link")))
	victimID, victimAddr := victim.Annotations[ccm.AnnotationPrivateIPIDs], victim.Annotations[request.AnnotationAddresses]
	// A retained reservation of another Service (deleted, not yet released).
	h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "gone", ann(request.AnnotationPool, "dc-link")), nil, false))
	goneID, _ := h.ipByAddress("172.16.35.201")
	foreign, _ := h.Srv.AddIP(h.PNs["dc"].ID, mustAddr("172.16.34.15"), []string{"team-b"}, &emulator.Resource{Type: "rdb_instance", ID: "db", Name: "orders"})
	nodesIP, _ := h.Srv.AddIP(h.PNs["nodes"].ID, mustAddr("172.16.0.40"), nil, nil)
	otherCluster, _ := h.Srv.AddIP(h.PNs["edge"].ID, mustAddr("10.10.0.60"), []string{"scw-lb-ipam", "scw-lb-ipam/cluster=staging", "scw-lb-ipam/pool=general", "scw-lb-ipam/service=payments/thief"}, nil)

	for _, tt := range []struct {
		name string
		ns   string
		ann  map[string]string
		want string
	}{
		{"another Service's IPAM ID", "payments", ann(request.AnnotationIPAMIDs, victimID), "already used by Service payments/victim"},
		{"another Service's IPAM ID, raw", "payments", ann(ccm.AnnotationPrivateIPIDs, victimID), "already used by Service payments/victim"},
		{"another Service's address", "payments", ann(request.AnnotationAddress, victimAddr), "is held by Service payments/victim"},
		{"another Service's retained reservation", "payments", ann(request.AnnotationIPAMIDs, goneID), "reserved for Service payments/gone"},
		{"an IP attached to a database", "payments", ann(request.AnnotationIPAMIDs, foreign), "attached to rdb_instance orders"},
		{"another cluster's reservation, same Service name", "payments", ann(request.AnnotationIPAMIDs, otherCluster), "of cluster staging"},
		{"an address of a pool not allowed for the namespace", "web", ann(request.AnnotationAddress, "172.16.35.210"), "in none of the pools namespace web may use"},
		{"a pool not allowed for the namespace", "web", ann(request.AnnotationPool, "dc-link"), `pool "dc-link" is not allowed for namespace web`},
		{"an IP outside every pool the namespace may use", "web", ann(request.AnnotationIPAMIDs, nodesIP), "not on the Private Network of a pool namespace web may use"},
	} {
		before := len(h.Srv.IPs())
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService(tt.ns, "thief", tt.ann), nil, false))
		if r.Allowed || !strings.Contains(r.Result.Message, tt.want) {
			t.Errorf("%s: allowed=%v %q, want a denial mentioning %q", tt.name, r.Allowed, r.Result.Message, tt.want)
		}
		if n := h.Srv.Count(emulator.OpUpdateIP) + h.Srv.Count(emulator.OpReleaseIP); n != 0 || len(h.Srv.IPs()) != before {
			t.Errorf("%s: the denial changed IPAM (%d writes, %d → %d IPs)", tt.name, n, before, len(h.Srv.IPs()))
		}
	}
}
