package webhook

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// created admits a CREATE and stores the result as the live Service.
func (h *harness) created(svc *corev1.Service) *corev1.Service {
	h.T.Helper()
	r, _ := h.send(review(admissionv1.Create, svc, nil, false))
	if !r.Allowed {
		h.T.Fatalf("create denied: %s", r.Result.Message)
	}
	return h.store(svc, r)
}

func TestUpdate(t *testing.T) {
	t.Run("unchanged is idempotent and calls nothing", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		next := live.DeepCopy()
		next.Spec.Ports = append(next.Spec.Ports, corev1.ServicePort{Name: "http", Port: 80})
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		h.check("unchanged", r, expect{allowed: true})
	})

	t.Run("annotations dropped by an apply are restored", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		next := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		h.check("restored", r, expect{allowed: true, ops: func(h *harness) []jsonpatch.Operation {
			return addOps(live.Annotations[ccm.AnnotationPrivateIPIDs], live.Annotations[ccm.AnnotationPNIDs], live.Annotations[request.AnnotationAddresses])
		}})
	})

	t.Run("pool change denied without allow-ip-change", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		next := live.DeepCopy()
		next.Annotations[request.AnnotationPool] = "general"
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		h.check("denied", r, denied(`changing annotation scw-lb-ipam.io/pool from "dc-link" to "general"`, `set annotation scw-lb-ipam.io/allow-ip-change: "true"`))
	})

	t.Run("pool change with allow-ip-change reserves anew", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		oldID := live.Annotations[ccm.AnnotationPrivateIPIDs]
		next := live.DeepCopy()
		next.Annotations[request.AnnotationPool] = "general"
		next.Annotations[request.AnnotationAllowIPChange] = "true"
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		want := reserved("general", "10.10.0.2", "nodes", "edge")
		want.ops = func(h *harness) []jsonpatch.Operation {
			id, _ := h.ipByAddress("10.10.0.2")
			ops := addOps(id, h.pnList("nodes", "edge"), "10.10.0.2")
			for i := range ops {
				ops[i].Operation = "replace"
			}
			return ops
		}
		h.check("allowed", r, want)
		if _, ok := h.Srv.IP(oldID); !ok {
			t.Fatal("the old IP was released by the webhook; the sweeper owns that")
		}
	})

	t.Run("hand-edited private-ip-ids denied", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		next := live.DeepCopy()
		next.Annotations[ccm.AnnotationPrivateIPIDs] = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, live, false))
		h.check("denied", r, denied("changing annotation service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids", "allow-ip-change"))
	})

	t.Run("ClusterIP to LoadBalancer allocates", func(t *testing.T) {
		h := newHarness(t)
		old := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
		old.Spec.Type = corev1.ServiceTypeClusterIP
		next := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
		if err := h.alloc.Inventory().Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, next, old, false))
		h.check("allocated", r, reserved("dc-link", "172.16.35.200", "nodes", "dc"))
	})
}

func TestBringYourOwn(t *testing.T) {
	h := newHarness(t)
	edge := h.PNs["edge"].ID
	free, _ := h.Srv.AddIP(edge, mustAddr("10.10.0.77"), []string{"reserved-by-terraform"}, nil)
	attached, _ := h.Srv.AddIP(edge, mustAddr("10.10.0.78"), nil, &emulator.Resource{Type: "lb_server", ID: "lb-9", Name: "legacy-lb"})
	raw, _ := h.Srv.AddIP(edge, mustAddr("10.10.0.79"), nil, nil)

	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "byo", ann(request.AnnotationIPAMIDs, free)), nil, false))
	h.check("valid ipam-ids", r, expect{allowed: true, calls: "GetIP=1",
		ops: func(h *harness) []jsonpatch.Operation { return addOps(free, h.pnList("nodes", "edge"), "10.10.0.77") },
		warnings: func(*harness) []string {
			return []string{"scw-lb-ipam: using 10.10.0.77 (IPAM ID " + free + ", pool general), validated; it was reserved outside scw-lb-ipam and will never be released by it"}
		}})
	h.store(fixtures.PrivateService("web", "byo", ann(request.AnnotationIPAMIDs, free)), r)

	h.Srv.ResetCounts()
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("web", "thief", ann(request.AnnotationIPAMIDs, free)), nil, false))
	h.check("another Service's ID", r, func() expect {
		e := denied("annotation scw-lb-ipam.io/ipam-ids", "already used by Service web/byo")
		e.calls = "GetIP=1"
		return e
	}())

	h.Srv.ResetCounts()
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("web", "x", ann(request.AnnotationIPAMIDs, attached)), nil, false))
	h.check("attached", r, func() expect { e := denied("attached to lb_server legacy-lb"); e.calls = "GetIP=1"; return e }())

	h.Srv.ResetCounts()
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("web", "rawbyo", ann(ccm.AnnotationPrivateIPIDs, raw)), nil, false))
	h.check("raw private-ip-ids", r, expect{allowed: true, calls: "GetIP=1",
		ops: func(h *harness) []jsonpatch.Operation {
			// private-ip-ids stays as the user wrote it.
			return addOps(raw, h.pnList("nodes", "edge"), "10.10.0.79")[:2]
		},
		warnings: func(*harness) []string {
			return []string{"scw-lb-ipam: using 10.10.0.79 (IPAM ID " + raw + ", pool general), validated; it was reserved outside scw-lb-ipam and will never be released by it"}
		}})

	// Stealing another Service's booked reservation by its ID.
	live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
	h.Srv.ResetCounts()
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "copycat", ann(ccm.AnnotationPrivateIPIDs, live.Annotations[ccm.AnnotationPrivateIPIDs])), nil, false))
	h.check("tagged reservation", r, func() expect {
		e := denied("already used by Service payments/api")
		e.calls = "GetIP=1"
		return e
	}())
}

func TestRetriedCreateBooksOnce(t *testing.T) {
	h := newHarness(t)
	svc := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
	first, _ := h.send(review(admissionv1.Create, svc, nil, false))
	second, _ := h.send(review(admissionv1.Create, svc, nil, false))
	if !first.Allowed || !second.Allowed {
		t.Fatal("denied")
	}
	if a, b := patchOps(t, first), patchOps(t, second); !reflect.DeepEqual(a, b) {
		t.Fatalf("the retry got another patch:\n%+v\n%+v", a, b)
	}
	if n := h.Srv.Count(emulator.OpBookIP); n != 1 {
		t.Fatalf("%d bookings for one Service", n)
	}
	if !strings.HasPrefix(second.Warnings[0], "scw-lb-ipam: reused 172.16.35.200") {
		t.Fatalf("warning %q", second.Warnings)
	}
}

func TestMultiplePools(t *testing.T) {
	h := newHarness(t)
	if err := h.alloc.Inventory().Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link,general")), nil, false))
	if !r.Allowed {
		t.Fatal(r.Result.Message)
	}
	a, _ := h.ipByAddress("172.16.35.200")
	b, _ := h.ipByAddress("10.10.0.2")
	got := patchOps(t, r)
	want := addOps(a+","+b, h.pnList("nodes", "dc", "edge"), "172.16.35.200,10.10.0.2")
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("patch %+v\nwant %+v", got, want)
	}
	if c := h.calls(); c != "BookIP=2" {
		t.Fatalf("calls %s", c)
	}
	if ev := h.events.take(); len(ev) != 2 || ev[0] != "Normal IPReserved payments/api" {
		t.Fatalf("events %v", ev)
	}
}

func TestSecondPoolFailureReleasesTheFirst(t *testing.T) {
	h := newHarness(t)
	// general (IPAM chooses) is booked first, then dc-link fails: exhausted.
	for i := 200; i <= 203; i++ {
		_, _ = h.Srv.AddIP(h.PNs["dc"].ID, mustAddr("172.16.35."+itoa(i)), nil, nil)
	}
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "general,dc-link")), nil, false))
	if r.Allowed || !strings.Contains(r.Result.Message, "exhausted") {
		t.Fatalf("response %+v", r.Result)
	}
	for _, ip := range h.Srv.IPs() {
		if strings.HasPrefix(ip.Address.String(), "10.10.") {
			t.Fatalf("the general pool's IP %s was left booked", ip.Address)
		}
	}
	if ev := h.events.take(); len(ev) != 1 || ev[0] != "Warning IPReservationFailed payments/api" {
		t.Fatalf("events %v", ev)
	}
}

func TestProxyProtocolWarning(t *testing.T) {
	h := newHarness(t)
	svc := fixtures.PrivateService("web", "mixed", ann("service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2", "443"))
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "http", Port: 80})
	r, _ := h.send(review(admissionv1.Create, svc, nil, false))
	if len(r.Warnings) != 2 || !strings.Contains(r.Warnings[1], "PROXY protocol on ports 443 but not on 80") {
		t.Fatalf("warnings %q", r.Warnings)
	}
	all := fixtures.PrivateService("web", "all", ann("service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2", "*"))
	if r, _ := h.send(review(admissionv1.Create, all, nil, false)); len(r.Warnings) != 1 {
		t.Fatalf("warnings %q", r.Warnings)
	}
}

// TestMalformed: bad requests get a 400-class answer and book nothing.
func TestMalformed(t *testing.T) {
	h := newHarness(t)
	huge := strings.Repeat("a", 300_000)
	pod := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"d1c8a9e2-0000-4000-8000-000000000001","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"namespace":"web","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}}`)
	empty := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"d1c8a9e2-0000-4000-8000-000000000001","kind":{"group":"","version":"v1","kind":"Service"},"namespace":"web","operation":"CREATE","object":{}}}`)
	for _, tt := range []struct {
		name string
		body []byte
		code int32
	}{
		{"wrong kind", pod, http.StatusBadRequest},
		{"empty object", empty, http.StatusBadRequest},
		{"huge annotation", review(admissionv1.Create, fixtures.PrivateService("web", "big", ann(request.AnnotationPool, huge)), nil, false), http.StatusForbidden},
	} {
		r, _ := h.send(tt.body)
		if r.Allowed || r.Result == nil || r.Result.Code != tt.code {
			t.Errorf("%s: %+v", tt.name, r.Result)
		}
		if tt.name == "huge annotation" && len(r.Result.Message) > 1000 {
			t.Errorf("%s: the denial echoes %d bytes", tt.name, len(r.Result.Message))
		}
	}
	resp, err := http.Post(h.url+"/mutate", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode/100 != 4 {
		t.Errorf("not JSON: HTTP %d", resp.StatusCode)
	}
	if n := h.Srv.Count(emulator.OpBookIP); n != 0 || len(h.Srv.IPs()) != 0 {
		t.Fatalf("malformed input booked %d", n)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestUnknownFieldsSurvive: fields this build does not know (a newer
// apiserver's) are not removed by the patch.
func TestUnknownFieldsSurvive(t *testing.T) {
	h := newHarness(t)
	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"d1c8a9e2-0000-4000-8000-000000000001",
"kind":{"group":"","version":"v1","kind":"Service"},"namespace":"web","name":"future","operation":"CREATE",
"object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"future","namespace":"web"},
"spec":{"type":"LoadBalancer","ports":[{"port":443}],"trafficDistributionV9":"PreferSameRack"}}}}`)
	r, _ := h.send(body)
	if !r.Allowed {
		t.Fatal(r.Result.Message)
	}
	ops := patchOps(t, r)
	if len(ops) != 1 || ops[0].Path != "/metadata/annotations" || ops[0].Operation != "add" {
		t.Fatalf("patch %+v", ops)
	}
}
