package webhook

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestUpdateRules: the UPDATE rules alone, from (old, new, request), with
// no allocator and no cache: what each change is answered with.
func TestUpdateRules(t *testing.T) {
	h := newHarness(t)
	cfg := h.alloc.Config()
	const id, other = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f", "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"
	dc, nodes := h.PNs["dc"].ID, h.PNs["nodes"].ID
	// reservedSvc is a Service an earlier admission reserved 172.16.35.200
	// for in pool dc-link, with extra annotations.
	reservedSvc := func(kv ...string) *corev1.Service {
		a := ann(request.AnnotationPool, "dc-link", ccm.AnnotationPrivateIPIDs, id, request.AnnotationAddresses, "172.16.35.200", ccm.AnnotationPNIDs, nodes+","+dc)
		maps.Copy(a, ann(kv...))
		return fixtures.PrivateService("payments", "api", a)
	}
	dhcpSvc := func(kv ...string) *corev1.Service {
		s := fixtures.PrivateService("payments", "api", ann(kv...))
		s.Annotations[ccm.AnnotationLoadBalancerID] = "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa"
		return s
	}
	without := func(s *corev1.Service, keys ...string) *corev1.Service {
		for _, k := range keys {
			delete(s.Annotations, k)
		}
		return s
	}
	for name, tt := range map[string]struct {
		old, svc *corev1.Service
		verdict  verdict
		pools    []string          // the ask to allocate for
		rawIDs   []string          // its hand-written IDs
		pnIDs    []string          // its pn-ids
		kept     map[string]string // verdictKeep
		err      string            // verdictDeny, a fragment
	}{
		"a DHCP Load Balancer asking for a pool keeps its address": {
			old: dhcpSvc(), svc: dhcpSvc(request.AnnotationPool, "dc-link"), verdict: verdictKeepDHCP, pools: []string{"dc-link"}},
		"a DHCP Load Balancer given IDs by hand": {
			old: dhcpSvc(), svc: dhcpSvc(ccm.AnnotationPrivateIPIDs, id), verdict: verdictDeny,
			err: "adding annotation " + ccm.AnnotationPrivateIPIDs + " to a Service whose Load Balancer already exists"},
		"a DHCP Load Balancer moving with allow-ip-change": {
			old: dhcpSvc(), svc: dhcpSvc(request.AnnotationPool, "dc-link", request.AnnotationAllowIPChange, "true"), verdict: verdictAllocate, pools: []string{"dc-link"}},
		"nothing reserved before, no Load Balancer": {
			old: fixtures.PrivateService("payments", "api", nil), svc: fixtures.PrivateService("payments", "api", ann("team", "a")), verdict: verdictAllocate},
		"the same object": {
			old: reservedSvc(), svc: reservedSvc(), verdict: verdictKeep, kept: map[string]string{}},
		"a re-apply drops what was written": {
			old: reservedSvc(), svc: without(reservedSvc(), ccm.AnnotationPrivateIPIDs, request.AnnotationAddresses, ccm.AnnotationPNIDs), verdict: verdictKeep,
			kept: ann(ccm.AnnotationPrivateIPIDs, id, request.AnnotationAddresses, "172.16.35.200", ccm.AnnotationPNIDs, nodes+","+dc)},
		"another pool without allow-ip-change": {
			old: reservedSvc(), svc: reservedSvc(request.AnnotationPool, "general"), verdict: verdictDeny,
			err: `changing annotation ` + request.AnnotationPool + ` from "dc-link" to "general" would move the Service to another IP`},
		"another pool with allow-ip-change leaves the old pool's network": {
			old: reservedSvc(), svc: reservedSvc(request.AnnotationPool, "general", request.AnnotationAllowIPChange, "true"), verdict: verdictAllocate,
			// The IDs still on the object go along: a plan of pools ignores them.
			pools: []string{"general"}, rawIDs: []string{id}, pnIDs: []string{nodes}},
		"IDs edited by hand with allow-ip-change are brought-your-own": {
			old: reservedSvc(), svc: reservedSvc(ccm.AnnotationPrivateIPIDs, other, request.AnnotationAllowIPChange, "true"), verdict: verdictAllocate,
			rawIDs: []string{other}, pnIDs: []string{nodes}},
		"IDs edited by hand without allow-ip-change": {
			old: reservedSvc(), svc: reservedSvc(ccm.AnnotationPrivateIPIDs, other), verdict: verdictDeny,
			err: `changing annotation ` + ccm.AnnotationPrivateIPIDs + ` from "` + id + `" to "` + other + `"`},
	} {
		t.Run(name, func(t *testing.T) {
			ask, err := request.Parse(tt.svc.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			r := updateRules(cfg, tt.old, tt.svc, ask)
			if r.verdict != tt.verdict {
				t.Fatalf("verdict %d, want %d (%+v)", r.verdict, tt.verdict, r)
			}
			switch tt.verdict {
			case verdictDeny:
				if r.err == nil || !strings.Contains(r.err.Error(), tt.err) {
					t.Fatalf("refusal %v, want one saying %q", r.err, tt.err)
				}
			case verdictKeep:
				if !maps.Equal(r.kept, tt.kept) {
					t.Fatalf("kept %v, want %v", r.kept, tt.kept)
				}
			default:
				if !slices.Equal(r.ask.Pools, tt.pools) || !slices.Equal(r.ask.RawIDs, tt.rawIDs) || !slices.Equal(r.ask.PNIDs, tt.pnIDs) {
					t.Fatalf("allocates for pools %v, IDs %v, pn-ids %v; want %v, %v, %v", r.ask.Pools, r.ask.RawIDs, r.ask.PNIDs, tt.pools, tt.rawIDs, tt.pnIDs)
				}
			}
		})
	}
}
