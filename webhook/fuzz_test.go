package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// FuzzParseRequest: any annotation values parse or are refused with the
// annotation's name; nothing panics, and what parses is what was written.
func FuzzParseRequest(f *testing.F) {
	f.Add("dc-link", "172.16.4.210", "", "", "")
	f.Add("dc-link,general", "", "", "", "true")
	f.Add("", "", "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f", "", "")
	f.Add("", "fd00::1,10.0.0.1", "", "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f", "false")
	f.Add(" a , b ", "1.2.3.4,1.2.3.4", "x", "y", "maybe")
	f.Fuzz(func(t *testing.T, pool, address, ids, raw, allow string) {
		ann := map[string]string{}
		for k, v := range map[string]string{ccm.AnnotationPool: pool, ccm.AnnotationAddress: address, ccm.AnnotationIPAMIDs: ids, ccm.AnnotationPrivateIPIDs: raw, ccm.AnnotationAllowIPChange: allow} {
			if v != "" {
				ann[k] = v
			}
		}
		r, err := parseRequest(ann)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "annotation ") || len(err.Error()) > 2000 {
				t.Fatalf("unclear or unbounded error: %.300q", err.Error())
			}
			return
		}
		for _, p := range r.Pools {
			if !strings.Contains(pool, p) || !ipam.IsName(p) {
				t.Fatalf("pool %q not from %q", p, pool)
			}
		}
		for _, a := range r.Addresses {
			if !strings.Contains(address, a.String()) && !strings.Contains(strings.ToLower(address), a.String()) && a.Zone() == "" {
				// netip canonicalises (e.g. IPv6 zero compression): it must
				// at least reparse to itself.
				if a.String() == "" {
					t.Fatalf("empty address from %q", address)
				}
			}
		}
		if r.AllowIPChange != (allow == "true") {
			t.Fatalf("allow-ip-change %q read as %v", allow, r.AllowIPChange)
		}
	})
}

// FuzzAdmissionReview sends any body to the webhook over HTTP: it always
// answers with an AdmissionReview (or a 4xx), patches only annotations, and
// books nothing for what it does not mutate.
func FuzzAdmissionReview(f *testing.F) {
	svc := service("payments", "api", ann(ccm.AnnotationPool, "dc-link"))
	f.Add(review(admissionv1.Create, svc, nil, false))
	f.Add(review(admissionv1.Create, service("web", "front", nil), nil, true))
	f.Add(review(admissionv1.Update, svc, svc, false))
	f.Add(review(admissionv1.Create, service("plain", "x", ann(ccm.AnnotationPool, "general")), nil, false))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Service"},"namespace":"payments","operation":"CREATE","object":{}}}`))
	f.Add([]byte(`not json`))
	h := newHarness(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := len(h.srv.IPs())
		r, status, err := h.sendRaw(body)
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			if status/100 != 4 {
				t.Fatalf("no AdmissionReview and HTTP %d", status)
			}
			return
		}
		if len(r.Patch) == 0 && len(h.srv.IPs()) != before {
			t.Fatalf("booked %d IPs without mutating the Service", len(h.srv.IPs())-before)
		}
		var ops []map[string]any
		if len(r.Patch) > 0 {
			if err := json.Unmarshal(r.Patch, &ops); err != nil {
				t.Fatalf("patch is not JSON: %v", err)
			}
		}
		for _, op := range ops {
			p, _ := op["path"].(string)
			if strings.HasPrefix(p, "/metadata/annotations") {
				continue
			}
			// An object without metadata gets metadata holding annotations only.
			if v, ok := op["value"].(map[string]any); p == "/metadata" && op["op"] == "add" && ok && len(v) == 1 && v["annotations"] != nil {
				continue
			}
			t.Fatalf("patch touches %s: %v", p, op)
		}
	})
}
