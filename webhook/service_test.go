package webhook

import (
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
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

// counted are the emulator operations whose counts the tests pin.
var counted = []emulator.Op{emulator.OpListIPs, emulator.OpBookIP, emulator.OpGetIP, emulator.OpUpdateIP, emulator.OpReleaseIP}

// calls are the counted operations made, "" for none.
func (h *harness) calls() string { return h.CallsMade(counted...) }

type expect struct {
	allowed  bool
	code     int32    // status code of a denial
	message  []string // fragments of the denial message
	ops      func(h *harness) []jsonpatch.Operation
	warnings func(h *harness) []string
	calls    string // emulator calls, "" for none
	// retryAfter is the Retry-After of a retryable denial (code 429).
	retryAfter int32
}

func (h *harness) check(name string, r *admissionv1.AdmissionResponse, want expect) {
	h.T.Helper()
	if string(r.UID) != "d1c8a9e2-0000-4000-8000-000000000001" {
		h.T.Errorf("%s: UID not echoed: %q", name, r.UID)
	}
	if r.Allowed != want.allowed {
		msg := ""
		if r.Result != nil {
			msg = r.Result.Message
		}
		h.T.Fatalf("%s: allowed = %v, want %v (%s)", name, r.Allowed, want.allowed, msg)
	}
	if !want.allowed {
		if r.Result == nil || r.Result.Code != want.code {
			h.T.Errorf("%s: status = %+v, want code %d", name, r.Result, want.code)
		}
		var after int32
		if r.Result != nil && r.Result.Details != nil {
			after = r.Result.Details.RetryAfterSeconds
		}
		if after != want.retryAfter {
			h.T.Errorf("%s: Retry-After %d, want %d", name, after, want.retryAfter)
		}
		for _, f := range want.message {
			if !strings.Contains(r.Result.Message, f) {
				h.T.Errorf("%s: message %q does not mention %q", name, r.Result.Message, f)
			}
		}
	}
	var wantOps []jsonpatch.Operation
	if want.ops != nil {
		wantOps = want.ops(h)
	}
	if got := patchOps(h.T, r); !reflect.DeepEqual(got, wantOps) {
		h.T.Errorf("%s: patch\n got %+v\nwant %+v", name, got, wantOps)
	}
	var wantWarn []string
	if want.warnings != nil {
		wantWarn = want.warnings(h)
	}
	if !reflect.DeepEqual(r.Warnings, wantWarn) {
		h.T.Errorf("%s: warnings\n got %q\nwant %q", name, r.Warnings, wantWarn)
	}
	if got := h.calls(); got != want.calls {
		h.T.Errorf("%s: Scaleway calls = %q, want %q", name, got, want.calls)
	}
}

func ann(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// reserved is the expected outcome of booking addr on the pools' networks.
func reserved(pool, addr string, pns ...string) expect {
	return expect{
		allowed: true,
		ops: func(h *harness) []jsonpatch.Operation {
			id, _ := h.ipByAddress(addr)
			return addOps(id, h.pnList(pns...), addr)
		},
		warnings: func(h *harness) []string {
			id, _ := h.ipByAddress(addr)
			return []string{fmt.Sprintf("scw-lb-ipam: reserved %s (IPAM ID %s) from pool %s", addr, id, pool)}
		},
		calls: "BookIP=1",
	}
}

func (h *harness) pnList(names ...string) string {
	ids := make([]string, len(names))
	for i, n := range names {
		ids[i] = h.PNs[n].ID
	}
	return strings.Join(ids, ",")
}

func denied(fragments ...string) expect {
	return expect{allowed: false, code: http.StatusForbidden, message: fragments}
}

// retry is a denial the client retries by itself after Retry-After.
func retry(calls string, fragments ...string) expect {
	return expect{allowed: false, code: http.StatusTooManyRequests, retryAfter: 2, message: fragments, calls: calls}
}

// TestCreate is one row per CREATE semantics and denial reason, each on a
// fresh emulator and cache.
func TestCreate(t *testing.T) {
	untouched := expect{allowed: true}
	// Seven networks besides the nodes': pn-ids at a Load Balancer's limit.
	const sevenPNs = "7a000001-0000-4000-8000-000000000001,7a000002-0000-4000-8000-000000000002,7a000003-0000-4000-8000-000000000003," +
		"7a000004-0000-4000-8000-000000000004,7a000005-0000-4000-8000-000000000005,7a000006-0000-4000-8000-000000000006,7a000007-0000-4000-8000-000000000007"
	byoOver8 := fixtures.PrivateService("web", "api", nil)
	tests := []struct {
		name   string
		svc    *corev1.Service
		dryRun bool
		setup  func(h *harness)
		want   expect
	}{
		{name: "pool from ranges", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")),
			want: reserved("dc-link", "172.16.35.200", "nodes", "dc")},
		{name: "default pool when nothing is asked", svc: fixtures.PrivateService("web", "front", ann("team", "web")),
			want: reserved("general", "10.10.0.2", "nodes", "edge")},
		{name: "specific address infers its pool", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "172.16.35.202")),
			want: reserved("dc-link", "172.16.35.202", "nodes", "dc")},
		{name: "autoAssign false pool with address", svc: fixtures.PrivateService("web", "lab", ann(request.AnnotationPool, "manual", request.AnnotationAddress, "10.30.0.50")),
			want: reserved("manual", "10.30.0.50", "nodes", "lab")},
		{name: "user pn-ids kept and extended", svc: fixtures.PrivateService("web", "front", ann("service.beta.kubernetes.io/scw-loadbalancer-pn-ids", "{{nodes}}")),
			want: func() expect {
				e := reserved("general", "10.10.0.2", "nodes", "edge")
				e.ops = func(h *harness) []jsonpatch.Operation {
					id, _ := h.ipByAddress("10.10.0.2")
					ops := addOps(id, h.pnList("nodes", "edge"), "10.10.0.2")
					ops[1].Operation = "replace"
					return ops
				}
				return e
			}()},
		// A Load Balancer attaches at most 8 Private Networks: refused
		// before any Scaleway call, naming the networks.
		{name: "pool's network over a Load Balancer's 8", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", ccm.AnnotationPNIDs, "{{nodes}},"+sevenPNs)),
			want: denied(ccm.AnnotationPNIDs+" would list 9 Private Networks (the networks "+ccm.AnnotationPNIDs+" lists, then those of pools dc-link: ",
				sevenPNs+",", "a Scaleway Load Balancer attaches at most 8", "list fewer networks in "+ccm.AnnotationPNIDs+", or ask for fewer pools")},
		// Brought-your-own IDs name their network once validated: refused
		// then, before the patch, with nothing booked or released.
		{name: "brought-your-own IP's network over a Load Balancer's 8", svc: byoOver8,
			setup: func(h *harness) {
				ids := []string{h.PNs["nodes"].ID, h.PNs["dc"].ID, h.PNs["lab"].ID, h.PNs["old"].ID, h.PNs["tmp"].ID}
				for i := range 3 {
					pn, err := h.Srv.AddPrivateNetwork(fmt.Sprintf("more-%d", i), fmt.Sprintf("10.6%d.0.0/24", i))
					if err != nil {
						h.T.Fatal(err)
					}
					ids = append(ids, pn.ID)
				}
				id, err := h.Srv.AddIP(h.PNs["edge"].ID, netip.MustParseAddr("10.10.0.50"), nil, nil)
				if err != nil {
					h.T.Fatal(err)
				}
				byoOver8.Annotations = ann(request.AnnotationIPAMIDs, id, ccm.AnnotationPNIDs, strings.Join(ids, ","))
			},
			want: func() expect {
				e := denied(ccm.AnnotationPNIDs+" would list 9 Private Networks (the networks "+ccm.AnnotationPNIDs+" lists, then those of the reserved IPs: ", "a Scaleway Load Balancer attaches at most 8")
				e.calls = "GetIP=1"
				return e
			}()},
		{name: "not a LoadBalancer", svc: func() *corev1.Service {
			s := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
			s.Spec.Type = corev1.ServiceTypeClusterIP
			return s
		}(), want: untouched},
		{name: "namespace not opted in", svc: fixtures.PrivateService("plain", "api", ann(request.AnnotationPool, "dc-link", request.AnnotationIPAMIDs, "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f")), want: untouched},
		{name: "kube-system excluded", svc: fixtures.PrivateService("kube-system", "api", ann(request.AnnotationPool, "general")), want: untouched},
		{name: "release namespace excluded", svc: fixtures.PrivateService("scw-lb-ipam", "api", ann(request.AnnotationPool, "general")), want: untouched},
		{name: "dry run books nothing", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), dryRun: true,
			want: expect{allowed: true, calls: "",
				warnings: func(*harness) []string {
					return []string{"scw-lb-ipam: dry run: would reserve 172.16.35.200 from pool dc-link; nothing was booked"}
				}}},
		{name: "unknown pool", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "nope")),
			want: denied(`annotation scw-lb-ipam.io/pool: value "nope": there is no pool "nope"; pools namespace payments may use: dc-link, general, manual, drained, v6, dc-other`)},
		{name: "pool not allowed", svc: fixtures.PrivateService("web", "api", ann(request.AnnotationPool, "dc-link")),
			want: denied(`pool "dc-link" is not allowed for namespace web; pools it may use: general, manual, drained, v6, dc-other`)},
		{name: "address outside pools", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "192.168.1.1")),
			want: denied("annotation scw-lb-ipam.io/address", "192.168.1.1 is in none of the pools namespace payments may use")},
		{name: "address outside the named pool", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", request.AnnotationAddress, "172.16.35.250")),
			want: denied("172.16.35.250 is outside pool dc-link's ranges 172.16.35.200-172.16.35.203")},
		{name: "address IPAM keeps", svc: fixtures.PrivateService("web", "api", ann(request.AnnotationAddress, "10.10.0.1")),
			want: denied("10.10.0.1 is reserved by Scaleway IPAM (the first two and last two addresses of 10.10.0.0/24)")},
		{name: "disabled pool", svc: fixtures.PrivateService("web", "api", ann(request.AnnotationPool, "drained")),
			want: denied(`annotation scw-lb-ipam.io/pool: value "drained"`, "is disabled (draining)")},
		{name: "autoAssign false without address", svc: fixtures.PrivateService("web", "api", ann(request.AnnotationPool, "manual")),
			want: denied("autoAssign: false", "set scw-lb-ipam.io/address")},
		{name: "two pools on one network", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link,dc-other")),
			want: denied("same Private Network", "one IP per Private Network")},
		{name: "IPv6 only", svc: fixtures.PrivateService("web", "api", ann(request.AnnotationPool, "v6")),
			want: denied("only IPv6 pools", "IPv4 status only")},
		{name: "generateName", svc: func() *corev1.Service {
			s := fixtures.PrivateService("payments", "", ann(request.AnnotationPool, "dc-link"))
			s.GenerateName = "api-"
			return s
		}(), want: denied("only generateName", "set one")},
		{name: "bad address syntax", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "172.16.35.x")),
			want: denied(`annotation scw-lb-ipam.io/address: value "172.16.35.x"`, "not an IP address")},
		{name: "bad allow-ip-change", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", request.AnnotationAllowIPChange, "yes")),
			want: denied(`must be "true" or "false"`)},
		{name: "ids and pool together", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", request.AnnotationIPAMIDs, "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f")),
			want: denied("cannot be combined")},
		{name: "address held by another Service", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "172.16.35.201")),
			setup: func(h *harness) {
				r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "other", ann(request.AnnotationAddress, "172.16.35.201")), nil, false))
				if !r.Allowed {
					h.T.Fatal(r.Result.Message)
				}
			},
			want: func() expect {
				e := denied("address 172.16.35.201 of pool \"dc-link\" is held by Service payments/other (cluster test)")
				e.calls = "BookIP=1"
				return e
			}()},
		{name: "address held by a resource", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationAddress, "172.16.35.201")),
			setup: func(h *harness) {
				if _, err := h.Srv.AddIP(h.PNs["dc"].ID, mustAddr("172.16.35.201"), nil, &emulator.Resource{Type: "instance_server", ID: "s1", Name: "bastion"}); err != nil {
					h.T.Fatal(err)
				}
			},
			want: func() expect {
				// Not in the occupancy view yet: the conflict lists the subnet to name the holder.
				e := denied("held by instance_server bastion")
				e.calls = "ListIPs=1 BookIP=1"
				return e
			}()},
		{name: "pool exhausted", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")),
			setup: func(h *harness) {
				for i := 200; i <= 203; i++ {
					if _, err := h.Srv.AddIP(h.PNs["dc"].ID, mustAddr(fmt.Sprint("172.16.35.", i)), nil, nil); err != nil {
						h.T.Fatal(err)
					}
				}
				if err := h.alloc.Inventory().Refresh(h.T.Context()); err != nil {
					h.T.Fatal(err)
				}
			},
			want: func() expect {
				// Known from the listing: refused without a call.
				e := denied(`pool "dc-link" is exhausted (4/4 used)`)
				e.calls = ""
				return e
			}()},
		{name: "Scaleway unavailable", svc: fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")),
			setup: func(h *harness) { h.Srv.FailNext(emulator.OpBookIP, 100, emulator.Fault{Status: 503}) },
			want: func() expect {
				// A booking is not retried blindly (it may have happened):
				// the Service's reservations are listed in between. The
				// condition passes: a 429 the client retries by itself.
				e := retry("ListIPs=1 BookIP=2", "Scaleway IPAM API is unavailable after retries", "nothing was reserved")
				e.retryAfter = 5
				return e
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for k, v := range tt.svc.Annotations {
				for name, pn := range h.PNs {
					v = strings.ReplaceAll(v, "{{"+name+"}}", pn.ID)
				}
				tt.svc.Annotations[k] = v
			}
			// Steady state: the pools' occupancy is listed in the background.
			if err := h.alloc.Inventory().Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(h)
			}
			h.Srv.ResetCounts()
			r, status := h.send(review(admissionv1.Create, tt.svc, nil, tt.dryRun))
			if status != http.StatusOK {
				t.Fatalf("HTTP %d", status)
			}
			h.check(tt.name, r, tt.want)
		})
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
