package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// replaceOp is the patch that sets one annotation the object already has.
func replaceOp(key, value string) jsonpatch.Operation {
	return jsonpatch.Operation{Operation: "replace", Path: "/metadata/annotations/" + strings.ReplaceAll(key, "/", "~1"), Value: value}
}

// reapplied is the live Service as a re-apply of its manifest sends it:
// the fields the manifest declares are reset to the manifest's values.
func reapplied(live *corev1.Service, manifest map[string]string) *corev1.Service {
	next := live.DeepCopy()
	for k, v := range manifest {
		next.Annotations[k] = v
	}
	return next
}

// Finding 1: kubectl apply (client-side or server-side), Helm 4, Argo CD
// and Flux reset the annotations their manifest declares. pn-ids goes back
// to the user's networks, and the real CCM would detach the pool's network
// with the reserved IP: every reservation's network is added back, with no
// Scaleway call.
func TestReapplyKeepsThePoolsNetwork(t *testing.T) {
	t.Run("pn-ids reset to the manifest's", func(t *testing.T) {
		h := newHarness(t)
		manifest := ann(request.AnnotationPool, "dc-link", ccm.AnnotationPNIDs, h.PNs["nodes"].ID)
		live := h.created(fixtures.PrivateService("payments", "api", manifest))
		if got, want := live.Annotations[ccm.AnnotationPNIDs], h.pnList("nodes", "dc"); got != want {
			t.Fatalf("created with pn-ids %q, want %q", got, want)
		}
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, manifest), live, false))
		h.check("re-applied", r, expect{allowed: true, ops: func(h *harness) []jsonpatch.Operation {
			return []jsonpatch.Operation{replaceOp(ccm.AnnotationPNIDs, h.pnList("nodes", "dc"))}
		}})
	})
	t.Run("a network the user adds is kept, the pool's added back", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", ccm.AnnotationPNIDs, h.PNs["nodes"].ID)))
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, ann(ccm.AnnotationPNIDs, h.pnList("nodes", "lab"))), live, false))
		h.check("re-applied", r, expect{allowed: true, ops: func(h *harness) []jsonpatch.Operation {
			return []jsonpatch.Operation{replaceOp(ccm.AnnotationPNIDs, h.pnList("nodes", "lab", "dc"))}
		}})
	})
	t.Run("a Service that already lost the pool's network gets it back", func(t *testing.T) {
		h := newHarness(t)
		manifest := ann(request.AnnotationPool, "dc-link", ccm.AnnotationPNIDs, h.PNs["nodes"].ID)
		live := h.created(fixtures.PrivateService("payments", "api", manifest))
		live.Annotations[ccm.AnnotationPNIDs] = h.PNs["nodes"].ID // stored by an earlier version
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, manifest), live, false))
		h.check("re-applied", r, expect{allowed: true, ops: func(h *harness) []jsonpatch.Operation {
			return []jsonpatch.Operation{replaceOp(ccm.AnnotationPNIDs, h.pnList("nodes", "dc"))}
		}})
	})
	t.Run("adding the pool's network back would pass a Load Balancer's 8: denied", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", ccm.AnnotationPNIDs, h.PNs["nodes"].ID)))
		h.Srv.ResetCounts()
		// The manifest now lists eight networks of its own, not the pool's:
		// with it added back, the Load Balancer would need nine.
		eight := h.pnList("nodes", "edge", "lab", "old", "tmp") + ",7a000001-0000-4000-8000-000000000001,7a000002-0000-4000-8000-000000000002,7a000003-0000-4000-8000-000000000003"
		r, _ := h.send(review(admissionv1.Update, reapplied(live, ann(ccm.AnnotationPNIDs, eight)), live, false))
		h.check("re-applied", r, denied(ccm.AnnotationPNIDs+" would list 9 Private Networks (the networks "+ccm.AnnotationPNIDs+" lists, then those of the reserved IPs: "+eight+","+h.PNs["dc"].ID+")",
			"a Scaleway Load Balancer attaches at most 8"))
	})
	t.Run("a network the user removes stays removed", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", ccm.AnnotationPNIDs, h.pnList("nodes", "lab"))))
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, ann(ccm.AnnotationPNIDs, h.PNs["nodes"].ID)), live, false))
		h.check("re-applied", r, expect{allowed: true, ops: func(h *harness) []jsonpatch.Operation {
			return []jsonpatch.Operation{replaceOp(ccm.AnnotationPNIDs, h.pnList("nodes", "dc"))}
		}})
	})
}

// Finding 7: equal requests are equal as sets, and the IDs the CCM reads
// are written in the one form it takes.
func TestReapplyComparesRequestsAsSets(t *testing.T) {
	t.Run("private-ip-ids with spaces, re-applied", func(t *testing.T) {
		h := newHarness(t)
		a, _ := h.Srv.AddIP(h.PNs["edge"].ID, mustAddr("10.10.0.77"), nil, nil)
		b, _ := h.Srv.AddIP(h.PNs["dc"].ID, mustAddr("172.16.35.202"), nil, nil)
		manifest := ann(ccm.AnnotationPrivateIPIDs, a+", "+b)
		live := h.created(fixtures.PrivateService("payments", "raw", manifest))
		if got := live.Annotations[ccm.AnnotationPrivateIPIDs]; got != a+","+b {
			t.Fatalf("created with private-ip-ids %q, want %q", got, a+","+b)
		}
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, manifest), live, false))
		h.check("re-applied", r, expect{allowed: true, ops: func(*harness) []jsonpatch.Operation {
			return []jsonpatch.Operation{replaceOp(ccm.AnnotationPrivateIPIDs, a+","+b)}
		}})
	})
	t.Run("pinning the current address", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, ann(request.AnnotationAddress, "172.16.35.200")), live, false))
		h.check("pinned", r, expect{allowed: true})
	})
	t.Run("pinning another address is a change", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")))
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, ann(request.AnnotationAddress, "172.16.35.201")), live, false))
		h.check("moved", r, denied(`changing annotation scw-lb-ipam.io/address from "" to "172.16.35.201"`, "allow-ip-change"))
	})
	t.Run("reordering pools", func(t *testing.T) {
		h := newHarness(t)
		live := h.created(fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link,general")))
		h.Srv.ResetCounts()
		r, _ := h.send(review(admissionv1.Update, reapplied(live, ann(request.AnnotationPool, "general,dc-link")), live, false))
		h.check("reordered", r, expect{allowed: true})
	})
}

// Finding 7: the CCM splits on commas and hands every item to the Scaleway
// API as it is, so only canonical IDs and plain network IDs pass.
func TestNonCanonicalIDsAreDenied(t *testing.T) {
	const id = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
	for name, tc := range map[string]struct {
		annotations func(nodes, lab string) map[string]string
		want        func(lab string) []string
	}{
		"upper-case ID": {func(_, _ string) map[string]string { return ann(request.AnnotationIPAMIDs, strings.ToUpper(id)) }, canonical},
		"braced ID":     {func(_, _ string) map[string]string { return ann(request.AnnotationIPAMIDs, "{"+id+"}") }, canonical},
		"urn ID":        {func(_, _ string) map[string]string { return ann(ccm.AnnotationPrivateIPIDs, "urn:uuid:"+id) }, canonical},
		"dashless ID": {func(_, _ string) map[string]string {
			return ann(request.AnnotationIPAMIDs, strings.ReplaceAll(id, "-", ""))
		}, canonical},
		"zonal pn-ids": {
			func(_, lab string) map[string]string {
				return ann(request.AnnotationPool, "general", ccm.AnnotationPNIDs, "fr-par-1/"+lab)
			},
			func(lab string) []string { return []string{"names a zone", "write the plain ID " + lab} },
		},
		"padded pn-ids": {
			func(nodes, lab string) map[string]string {
				return ann(request.AnnotationPool, "general", ccm.AnnotationPNIDs, nodes+", "+lab)
			},
			func(string) []string {
				return []string{"has spaces around it", "splits this annotation on commas only"}
			},
		},
		"upper-case pn-ids": {
			func(_, lab string) map[string]string {
				return ann(request.AnnotationPool, "general", ccm.AnnotationPNIDs, strings.ToUpper(lab))
			},
			func(string) []string { return []string{"not a Private Network ID in canonical form"} },
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			lab := h.PNs["lab"].ID
			r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", tc.annotations(h.PNs["nodes"].ID, lab)), nil, false))
			h.check(name, r, denied(tc.want(lab)...))
		})
	}
}

func canonical(string) []string { return []string{"canonical form", "36 lower-case characters"} }

// Finding 6: the apiserver's namespaceSelector matched, so a label the
// cache has not seen yet is read from the apiserver before admitting the
// Service untouched.
func TestNamespaceLabelledAMomentAgo(t *testing.T) {
	cached := func(h *harness) client.Reader {
		return fixtures.FakeKube().WithObjects(fixtures.Namespace("web", false)).Build()
	}
	t.Run("read live", func(t *testing.T) {
		h := newHarness(t)
		h.mutator.Namespaces, h.mutator.NamespacesLive = cached(h), h.Kube
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", nil), nil, false))
		h.check("labelled", r, reserved("general", "10.10.0.2", "nodes", "edge"))
	})
	t.Run("not labelled live either", func(t *testing.T) {
		h := newHarness(t)
		h.mutator.NamespacesLive = h.Kube
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("plain", "api", nil), nil, false))
		h.check("plain", r, expect{allowed: true})
	})
	t.Run("unreadable live", func(t *testing.T) {
		h := newHarness(t)
		h.mutator.Namespaces, h.mutator.NamespacesLive = cached(h), failingReader{h.Kube}
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("web", "api", nil), nil, false))
		h.check("fail closed", r, retry("", "namespace web cannot be read", "nothing was reserved, apply again in a moment"))
	})
}

// seedRetained books, as an earlier admission and the sweeper leave it, a
// reservation of svc in the pool tag named, retained since a minute ago,
// and lets the allocator's index learn it.
func (h *harness) seedRetained(pn, addr, pool string, svc types.NamespacedName, res *emulator.Resource) string {
	h.T.Helper()
	tags := ipam.Entry{Cluster: "test", Pool: pool, Service: svc, UID: "uid-of-the-previous", OrphanedSince: time.Now().Add(-time.Minute).Truncate(time.Second)}.Tags()
	id, err := h.Srv.AddIP(h.PNs[pn].ID, mustAddr(addr), tags, res)
	if err != nil {
		h.T.Fatal(err)
	}
	if err := h.alloc.Inventory().Refresh(context.Background()); err != nil {
		h.T.Fatal(err)
	}
	h.Srv.ResetCounts()
	return id
}

// poolTag reads the pool an IP is tagged with.
func (h *harness) poolTag(id string) string {
	h.T.Helper()
	ip, err := h.Cloud.GetIP(context.Background(), id)
	if err != nil {
		h.T.Fatal(err)
	}
	e, _ := ipam.ParseEntry(ip.Tags)
	return e.Pool
}

// Findings 2 and 3: a Service's own reservation is found before pool
// policy and by its network and address space, not by the pool's name.
func TestStickyBeforePolicy(t *testing.T) {
	api := types.NamespacedName{Namespace: "payments", Name: "api"}
	t.Run("a drained pool gives its Service's reservation back", func(t *testing.T) {
		h := newHarness(t)
		h.seedRetained("old", "10.40.0.9", "drained", api, nil)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "drained")), nil, false))
		h.check("re-created", r, reused("drained", "10.40.0.9", "GetIP=1 UpdateIP=1", "nodes", "old"))
		h.Srv.ResetCounts()
		r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "new", ann(request.AnnotationPool, "drained")), nil, false))
		h.check("new Service", r, denied(`pool "drained" is disabled (draining)`))
	})
	t.Run("a renamed pool keeps its Service's address", func(t *testing.T) {
		h := newHarness(t)
		id := h.seedRetained("dc", "172.16.35.201", "dc-old", api, nil)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), nil, false))
		h.check("re-created", r, reused("dc-link", "172.16.35.201", "GetIP=1 UpdateIP=1", "nodes", "dc"))
		if got := h.poolTag(id); got != "dc-link" {
			t.Fatalf("pool tag %q after the take-back, want dc-link", got)
		}
	})
	t.Run("a renamed pool, the address pinned", func(t *testing.T) {
		h := newHarness(t)
		h.seedRetained("dc", "172.16.35.201", "dc-old", api, nil)
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", request.AnnotationAddress, "172.16.35.201")), nil, false))
		h.check("re-created", r, reused("dc-link", "172.16.35.201", "GetIP=1 UpdateIP=1", "nodes", "dc"))
	})
	t.Run("an address the operator took out of the pool since is still refused", func(t *testing.T) {
		h := newHarness(t)
		h.seedRetained("dc", "172.16.35.210", "dc-link", api, nil) // the ranges were wider then
		r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link", request.AnnotationAddress, "172.16.35.210")), nil, false))
		h.check("refused", r, denied("172.16.35.210 is outside pool dc-link's ranges"))
	})
}

// Finding 4: Scaleway deletes a Load Balancer up to a minute after the CCM
// let its Service go. Once the previous Service object is gone, the
// re-create gets its reservation although the previous Load Balancer still
// holds it; the CCM attaches it to the new one when the old one lets go.
func TestRecreateWhileThePreviousLoadBalancerIsBeingDeleted(t *testing.T) {
	h := newHarness(t)
	api := types.NamespacedName{Namespace: "payments", Name: "api"}
	h.seedRetained("dc", "172.16.35.200", "dc-link", api, &emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "uid-of-the-previous"})
	r, _ := h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), nil, false))
	h.check("re-created", r, reused("dc-link", "172.16.35.200", "GetIP=1 UpdateIP=1", "nodes", "dc"))

	// Any other resource holding it is not the previous Load Balancer.
	h = newHarness(t)
	h.seedRetained("dc", "172.16.35.200", "dc-link", api, &emulator.Resource{Type: "instance_server", ID: "srv-1", Name: "vm-1"})
	r, _ = h.send(review(admissionv1.Create, fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link")), nil, false))
	want := reserved("dc-link", "172.16.35.201", "nodes", "dc")
	want.calls = "BookIP=1 GetIP=1" // the candidate is read, then passed over
	h.check("held by a server", r, want)
}

// Finding 8: a Service of another load-balancer controller is not ours.
func TestLoadBalancerClassIsOutOfScope(t *testing.T) {
	h := newHarness(t)
	svc := fixtures.PrivateService("payments", "api", ann(request.AnnotationPool, "dc-link"))
	class := "metallb.io/metallb"
	svc.Spec.LoadBalancerClass = &class
	h.Srv.ResetCounts()
	r, _ := h.send(review(admissionv1.Create, svc, nil, false))
	h.check("class", r, expect{allowed: true})
	if want, what, err := h.unreserved(svc); want || err != nil {
		t.Fatalf("Unreserved = %v (%s) %v: such a Service is never reported", want, what, err)
	}
}
