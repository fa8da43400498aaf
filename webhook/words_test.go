package webhook

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// clearedLBIP is the patch operation that clears spec.loadBalancerIP.
var clearedLBIP = jsonpatch.Operation{Operation: "remove", Path: "/spec/loadBalancerIP"}

// translatedTo is want with the warnings that name the words read first,
// and extra patch operations (sorted by path: after the annotations').
func translatedTo(want expect, extra []jsonpatch.Operation, warnings ...string) expect {
	ops, told := want.ops, want.warnings
	want.ops = func(h *harness) []jsonpatch.Operation { return append(ops(h), extra...) }
	want.warnings = func(h *harness) []string { return append(warnings, told(h)...) }
	return want
}

// readAs is the warning of one word read as this project's annotation.
func readAs(key, as, value string) string {
	return "scw-lb-ipam: " + key + " is read as " + as + `: "` + value + `"`
}

func withLBIP(svc *corev1.Service, ip string) *corev1.Service {
	svc.Spec.LoadBalancerIP = ip
	return svc
}

// TestCreateInOtherWords: one whole AdmissionReview per request form of
// another implementation, read as this project's own.
func TestCreateInOtherWords(t *testing.T) {
	svc := func(kv ...string) *corev1.Service { return fixtures.PrivateService("payments", "api", ann(kv...)) }
	addr := func(key, value, want string) expect {
		return translatedTo(reserved("dc-link", want, "nodes", "dc"), nil, readAs(key, request.AnnotationAddress, want))
	}
	pool := func(key string) expect {
		return translatedTo(reserved("dc-link", "172.16.35.200", "nodes", "dc"), nil, readAs(key, request.AnnotationPool, "dc-link"))
	}
	lbIPCleared := "scw-lb-ipam: spec.loadBalancerIP 172.16.35.201 is cleared: the Scaleway CCM refuses it on a private Load Balancer (it only handles static public IPs); the reserved address is written in " + request.AnnotationAddresses
	tests := []struct {
		name      string
		svc       *corev1.Service
		noTranslt bool
		want      expect
	}{
		{"MetalLB addresses", svc(neighbours.AnnotationMetalLBIPs, "172.16.35.201"), false, addr(neighbours.AnnotationMetalLBIPs, "172.16.35.201", "172.16.35.201")},
		{"MetalLB addresses, legacy prefix", svc(neighbours.AnnotationMetalLBIPsLegacy, "172.16.35.201"), false, addr(neighbours.AnnotationMetalLBIPsLegacy, "172.16.35.201", "172.16.35.201")},
		{"MetalLB pool", svc(neighbours.AnnotationMetalLBPool, "dc-link"), false, pool(neighbours.AnnotationMetalLBPool)},
		{"MetalLB pool, legacy prefix", svc(neighbours.AnnotationMetalLBPoolLegacy, "dc-link"), false, pool(neighbours.AnnotationMetalLBPoolLegacy)},
		{"Cilium LB IPAM addresses", svc(neighbours.AnnotationCiliumIPs, "172.16.35.202"), false, addr(neighbours.AnnotationCiliumIPs, "172.16.35.202", "172.16.35.202")},
		{"Calico addresses, a JSON list", svc(neighbours.AnnotationCalicoIPs, `["172.16.35.201"]`), false, addr(neighbours.AnnotationCalicoIPs, "", "172.16.35.201")},
		{"Calico pools, a JSON list", svc(neighbours.AnnotationCalicoPools, `["dc-link"]`), false, pool(neighbours.AnnotationCalicoPools)},
		{"kube-vip addresses", svc(neighbours.AnnotationKubeVIPIPs, "172.16.35.203"), false, addr(neighbours.AnnotationKubeVIPIPs, "172.16.35.203", "172.16.35.203")},
		{"EKS private addresses", svc(neighbours.AnnotationAWSPrivateIPv4, "172.16.35.201"), false, addr(neighbours.AnnotationAWSPrivateIPv4, "", "172.16.35.201")},
		{"AKS address", svc(neighbours.AnnotationAzureLoadBalancer4, "172.16.35.201"), false, addr(neighbours.AnnotationAzureLoadBalancer4, "", "172.16.35.201")},
		{"spec.loadBalancerIP, read and cleared", withLBIP(svc(), "172.16.35.201"), false,
			translatedTo(reserved("dc-link", "172.16.35.201", "nodes", "dc"), []jsonpatch.Operation{clearedLBIP},
				readAs("spec.loadBalancerIP", request.AnnotationAddress, "172.16.35.201"), lbIPCleared)},
		{"a pool and an address in MetalLB's words", fixtures.PrivateService("web", "lab", ann(neighbours.AnnotationMetalLBPool, "manual", neighbours.AnnotationMetalLBIPs, "10.30.0.50")), false,
			translatedTo(reserved("manual", "10.30.0.50", "nodes", "lab"), nil,
				readAs(neighbours.AnnotationMetalLBIPs, request.AnnotationAddress, "10.30.0.50"), readAs(neighbours.AnnotationMetalLBPool, request.AnnotationPool, "manual"))},
		{"this project's own annotation wins over another word", svc(request.AnnotationPool, "dc-link", neighbours.AnnotationMetalLBIPs, "10.30.0.50"), false,
			translatedTo(reserved("dc-link", "172.16.35.200", "nodes", "dc"), nil,
				"scw-lb-ipam: "+neighbours.AnnotationMetalLBIPs+" is ignored: annotation "+request.AnnotationPool+" is set, and this project's own request wins")},
		{"two words that disagree", svc(neighbours.AnnotationMetalLBIPs, "172.16.35.201", neighbours.AnnotationCiliumIPs, "172.16.35.202"), false,
			denied(`annotation lbipam.cilium.io/ips: value "172.16.35.202": asks for 172.16.35.202, but metallb.io/loadBalancerIPs asks for 172.16.35.201; they disagree, keep one`)},
		{"a pool name the pool file does not have", svc(neighbours.AnnotationMetalLBPool, "production"), false, func() expect {
			// The plan refuses it, as scw-lb-ipam.io/pool's, naming the word.
			e := denied(`annotation metallb.io/address-pool: value "production": read as scw-lb-ipam.io/pool, but scw-lb-ipam has no pool "production"; pools namespace payments may use: dc-link, general, manual, drained, v6, dc-other`)
			e.warnings = func(*harness) []string {
				return []string{readAs(neighbours.AnnotationMetalLBPool, request.AnnotationPool, "production")}
			}
			return e
		}()},
		{"this project's own annotation and a leftover word naming no pool: ignored, not refused", svc(request.AnnotationPool, "dc-link", neighbours.AnnotationMetalLBPool, "production"), false,
			translatedTo(reserved("dc-link", "172.16.35.200", "nodes", "dc"), nil,
				"scw-lb-ipam: "+neighbours.AnnotationMetalLBPool+" is ignored: annotation "+request.AnnotationPool+" is set, and this project's own request wins")},
		{"an address that does not parse", svc(neighbours.AnnotationKubeVIPIPs, "172.16.35.x"), false,
			denied(`annotation kube-vip.io/loadbalancerIPs: value "172.16.35.x": read as scw-lb-ipam.io/address, but "172.16.35.x" is not an IP address`)},
		{"a public spec.loadBalancerIP is the CCM's", withLBIP(fixtures.Service("web", "api", ann("team", "web")), "51.15.1.1"), false, func() expect {
			e := reserved("general", "10.10.0.2", "nodes", "edge")
			e.warnings = func(h *harness) []string {
				id, _ := h.ipByAddress("10.10.0.2")
				return []string{"scw-lb-ipam: reserved 10.10.0.2 (IPAM ID " + id + ") from pool general",
					`scw-lb-ipam: the Load Balancer also gets a public IP, as ` + ccm.AnnotationPrivate + ` is not "true"; set it for a private-only Load Balancer`}
			}
			e.ops = func(h *harness) []jsonpatch.Operation {
				id, _ := h.ipByAddress("10.10.0.2")
				return addOps(id, h.pnList("nodes", "edge"), "10.10.0.2")
			}
			return e
		}()},
		{"translation off: the default pool, the words unread", svc(neighbours.AnnotationMetalLBIPs, "172.16.35.201"), true, reserved("general", "10.10.0.2", "nodes", "edge")},
		{"translation off: spec.loadBalancerIP refused as before", withLBIP(svc(), "172.16.35.201"), true,
			denied("spec.loadBalancerIP 172.16.35.201: the CCM refuses spec.loadBalancerIP on a private Load Balancer")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.noTranslt {
				off := false
				h.alloc.Config().TranslateRequests = &off
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

// TestUpdateInOtherWords: an UPDATE compares the translated requests, as
// it compares this project's own.
func TestUpdateInOtherWords(t *testing.T) {
	tests := []struct {
		name   string
		create *corev1.Service
		next   func(live *corev1.Service) *corev1.Service
		want   expect
	}{
		{"a re-apply of the same words keeps the reservation",
			fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationMetalLBIPs, "172.16.35.201")),
			func(live *corev1.Service) *corev1.Service { return live.DeepCopy() },
			expect{allowed: true, warnings: func(*harness) []string {
				return []string{readAs(neighbours.AnnotationMetalLBIPs, request.AnnotationAddress, "172.16.35.201")}
			}}},
		{"a client-side re-apply sets spec.loadBalancerIP again: cleared, nothing booked",
			withLBIP(fixtures.PrivateService("payments", "api", ann("team", "pay")), "172.16.35.201"),
			func(live *corev1.Service) *corev1.Service { return withLBIP(live.DeepCopy(), "172.16.35.201") },
			expect{allowed: true, ops: func(*harness) []jsonpatch.Operation { return []jsonpatch.Operation{clearedLBIP} },
				warnings: func(*harness) []string {
					return []string{readAs("spec.loadBalancerIP", request.AnnotationAddress, "172.16.35.201"),
						"scw-lb-ipam: spec.loadBalancerIP 172.16.35.201 is cleared: the Scaleway CCM refuses it on a private Load Balancer (it only handles static public IPs); the reserved address is written in " + request.AnnotationAddresses}
				}}},
		{"moving from MetalLB's words to this project's is no change",
			fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationMetalLBPool, "dc-link")),
			func(live *corev1.Service) *corev1.Service {
				next := live.DeepCopy()
				delete(next.Annotations, neighbours.AnnotationMetalLBPool)
				next.Annotations[request.AnnotationPool] = "dc-link"
				return next
			},
			expect{allowed: true}},
		{"another address in the same words moves the Service: denied without allow-ip-change",
			fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationCiliumIPs, "172.16.35.201")),
			func(live *corev1.Service) *corev1.Service {
				next := live.DeepCopy()
				next.Annotations[neighbours.AnnotationCiliumIPs] = "172.16.35.202"
				return next
			},
			func() expect {
				e := denied(`changing annotation scw-lb-ipam.io/address from "172.16.35.201" to "172.16.35.202" would move the Service to another IP`)
				// A denial still names the words it read.
				e.warnings = func(*harness) []string {
					return []string{readAs(neighbours.AnnotationCiliumIPs, request.AnnotationAddress, "172.16.35.202")}
				}
				return e
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			live := h.created(tt.create)
			if live.Spec.LoadBalancerIP != "" {
				t.Fatalf("created with spec.loadBalancerIP %s, want it cleared", live.Spec.LoadBalancerIP)
			}
			h.Srv.ResetCounts()
			r, _ := h.send(review(admissionv1.Update, tt.next(live), live, false))
			h.check(tt.name, r, tt.want)
		})
	}
}

// TestUnreservedInOtherWords: the sweeper reads a request in other
// implementations' words as admission does, from the Service's Record.
func TestUnreservedInOtherWords(t *testing.T) {
	h := newHarness(t)
	for name, tt := range map[string]struct {
		svc  *corev1.Service
		want bool
		what string
	}{
		"a MetalLB pool":             {fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationMetalLBPool, "dc-link", "team", "pay")), true, "pool dc-link"},
		"spec.loadBalancerIP":        {withLBIP(fixtures.PrivateService("payments", "api", ann("team", "pay")), "172.16.35.201"), true, "pool dc-link"},
		"a pool the namespace lacks": {fixtures.PrivateService("web", "api", ann(neighbours.AnnotationMetalLBPool, "dc-link")), false, ""},
	} {
		got, what, err := h.unreserved(tt.svc)
		if err != nil || got != tt.want || what != tt.what {
			t.Errorf("%s: unreserved %v %q (%v), want %v %q", name, got, what, err, tt.want, tt.what)
		}
	}
}

// TestDenialsInTheUsersWords: a translated request is refused naming the
// word the user wrote, and its fix is written in that word: Argo CD and
// Flux do not show the warning that names the translation, so the denial
// is all the user sees.
func TestDenialsInTheUsersWords(t *testing.T) {
	for _, tt := range []struct {
		name, word, value string
		svc               func(h *harness) *corev1.Service
	}{
		{"an address in no pool", neighbours.AnnotationMetalLBIPs, "192.168.99.9", func(*harness) *corev1.Service {
			return fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationMetalLBIPs, "192.168.99.9"))
		}},
		{"a taken address", neighbours.AnnotationMetalLBIPsLegacy, "172.16.35.201", func(h *harness) *corev1.Service {
			h.created(fixtures.PrivateService("payments", "first", ann(request.AnnotationAddress, "172.16.35.201")))
			return fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationMetalLBIPsLegacy, "172.16.35.201"))
		}},
		{"a taken address in spec.loadBalancerIP", "spec.loadBalancerIP", "172.16.35.201", func(h *harness) *corev1.Service {
			h.created(fixtures.PrivateService("payments", "first", ann(request.AnnotationAddress, "172.16.35.201")))
			return withLBIP(fixtures.PrivateService("payments", "api", nil), "172.16.35.201")
		}},
		{"a pool word that does not parse", neighbours.AnnotationMetalLBPool, "Bad_Pool", func(*harness) *corev1.Service {
			return fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationMetalLBPool, "Bad_Pool"))
		}},
		{"a disabled pool", neighbours.AnnotationCalicoPools, `["drained"]`, func(*harness) *corev1.Service {
			return fixtures.PrivateService("payments", "api", ann(neighbours.AnnotationCalicoPools, `["drained"]`))
		}},
		{"an externally managed Service with a leftover word", neighbours.AnnotationMetalLBIPs, "172.16.35.202", func(*harness) *corev1.Service {
			return fixtures.PrivateService("payments", "api", ann(ccm.AnnotationExternallyManaged, "true", neighbours.AnnotationMetalLBIPs, "172.16.35.202"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			r, _ := h.send(review(admissionv1.Create, tt.svc(h), nil, false))
			if r.Allowed {
				t.Fatal("allowed")
			}
			msg := r.Result.Message
			if !strings.Contains(msg, fmt.Sprintf("%s: value %q", tt.word, tt.value)) {
				t.Errorf("the denial does not name %s: %q: %s", tt.word, tt.value, msg)
			}
			for _, own := range []string{request.AnnotationAddress, request.AnnotationPool} {
				if strings.Contains(strings.ReplaceAll(msg, "read as "+own, ""), own) {
					t.Errorf("the denial names %s, which the Service does not carry: %s", own, msg)
				}
			}
		})
	}
}
