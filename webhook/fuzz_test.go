package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// FuzzAdmissionReview sends any body to the webhook over HTTP: it always
// answers with an AdmissionReview (or a 4xx), patches only annotations, and
// books nothing for what it does not mutate.
func FuzzAdmissionReview(f *testing.F) {
	svc := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
	f.Add(review(admissionv1.Create, svc, nil, false))
	f.Add(review(admissionv1.Create, fixtures.PrivateService("web", "front", nil), nil, true))
	f.Add(review(admissionv1.Update, svc, svc, false))
	f.Add(review(admissionv1.Create, fixtures.PrivateService("plain", "x", ann(request.AnnotationPool, "general")), nil, false))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Service"},"namespace":"payments","operation":"CREATE","object":{}}}`))
	f.Add([]byte(`not json`))
	h := newHarness(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := len(h.Srv.IPs())
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
		if len(r.Patch) == 0 && len(h.Srv.IPs()) != before {
			t.Fatalf("booked %d IPs without mutating the Service", len(h.Srv.IPs())-before)
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
