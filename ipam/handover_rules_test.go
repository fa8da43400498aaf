package ipam

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

func TestHandoverSkip(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	old := Entry{Cluster: "old", Pool: "dc", Service: svcAPI, UID: "u0"}
	for _, tc := range []struct {
		name string
		e    Entry
		want string // a fragment; "" for none
	}{
		{"release beyond the margin: moves", retained(old, time.Hour, time.Hour), ""},
		{"live there: moves", old, ""},
		{"no release time", retained(old, time.Hour, 0), "cluster old retains it without a release time (an older scw-lb-ipam there): upgrade it"},
		{"stale release time", retained(old, time.Hour, -2*time.Hour), "its release time is stale (before it was retained); cluster old's sweeper rewrites it"},
		{"release within the margin", retained(old, time.Hour, 20*time.Second), "its release by cluster old is due within the safety margin"},
		{"release past", retained(old, 2*time.Hour, -time.Hour), "its release by cluster old is due within the safety margin"},
		{"release time of another retention", untied(retained(old, time.Hour, time.Hour)), "its release time was not written for this retention (another version of scw-lb-ipam wrote it); cluster old's sweeper rewrites it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HandoverSkip(rulesPolicy, dc, tc.e, "old", rulesNow)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("HandoverSkip = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHandoverCandidate(t *testing.T) {
	cfg := rulesConfig(t)
	old := Entry{Cluster: "old", Pool: "dc", Service: svcAPI, UID: "u0"}
	far := retained(old, time.Hour, time.Hour)
	web := types.NamespacedName{Namespace: "web", Name: "api"}
	gateway := types.NamespacedName{Namespace: "envoy-gateway-system", Name: "api"}
	for _, tc := range []struct {
		name      string
		namespace string
		ip        *scaleway.IP
		pool      string // "" when not a candidate
		skipped   string // a fragment, "" for none
	}{
		{"retained there, in a pool", "", ledgerIP("ip-1", subA, "172.16.4.15", far), "dc", ""},
		{"the pool by address, not by tag", "", ledgerIP("ip-1", subA, "172.16.4.105", far), "dc-high", ""},
		{"of the namespace asked for", "payments", ledgerIP("ip-1", subA, "172.16.4.15", far), "dc", ""},
		{"release too close: skipped", "", ledgerIP("ip-1", subA, "172.16.4.15", retained(old, time.Hour, 10*time.Second)), "dc", "due within the safety margin"},
		{"live there", "", ledgerIP("ip-1", subA, "172.16.4.15", old), "", ""},
		{"this cluster's", "", ledgerIP("ip-1", subA, "172.16.4.15", retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI}, time.Hour, time.Hour)), "", ""},
		{"another namespace than asked", "payments", ledgerIP("ip-1", subA, "172.16.4.15", retained(Entry{Cluster: "old", Pool: "dc", Service: web}, time.Hour, time.Hour)), "", ""},
		// A Gateway's Service lives in its controller's namespace; the
		// ledger's namespace tag names the Gateway's.
		{"a Gateway's of the namespace asked for", "payments", ledgerIP("ip-1", subA, "172.16.4.15", retained(Entry{Cluster: "old", Pool: "dc", Service: gateway, Namespace: "payments"}, time.Hour, time.Hour)), "dc", ""},
		{"a Gateway's of another namespace", "envoy-gateway-system", ledgerIP("ip-1", subA, "172.16.4.15", retained(Entry{Cluster: "old", Pool: "dc", Service: gateway, Namespace: "payments"}, time.Hour, time.Hour)), "", ""},
		{"outside every pool", "", ledgerIP("ip-1", subA, "172.16.4.50", far), "", ""},
		{"not in the ledger", "", &scaleway.IP{ID: "ip-1", SubnetID: subA, Tags: []string{"terraform"}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := HandoverRequest{From: "old", Namespace: tc.namespace, Now: func() time.Time { return rulesNow }}
			h, p, ok := HandoverCandidate(cfg, rulesPolicy, req, Read(tc.ip, rulesNow))
			if ok != (tc.pool != "") {
				t.Fatalf("candidate %v, want %v", ok, tc.pool != "")
			}
			if !ok {
				return
			}
			if p.Name != tc.pool || h.Pool != tc.pool || h.ID != tc.ip.ID || h.Address != tc.ip.Address || h.Service.Name != "api" {
				t.Errorf("handed %+v in %s, want pool %s", h, p.Name, tc.pool)
			}
			if tc.skipped == "" && h.Skipped != "" || !strings.Contains(h.Skipped, tc.skipped) {
				t.Errorf("skipped %q, want %q", h.Skipped, tc.skipped)
			}
		})
	}
}

// A request without a clock reads the real one, as HandoverRequest says.
func TestHandoverCandidateWithoutAClock(t *testing.T) {
	cfg := rulesConfig(t)
	old := Entry{Cluster: "old", Pool: "dc", Service: svcAPI, UID: "u0"}
	ip := ledgerIP("ip-1", subA, "172.16.4.15", retained(old, time.Hour, time.Hour))
	// Judged by the real clock, that reservation's release is long past.
	h, _, ok := HandoverCandidate(cfg, rulesPolicy, HandoverRequest{From: "old"}, Read(ip, rulesNow))
	if !ok || h.Skipped == "" {
		t.Fatalf("candidate %v, skipped %q: want one skipped by the real clock", ok, h.Skipped)
	}
}

// untied is e as read from tags whose release-for names another retention.
func untied(e Entry) Entry {
	tags := slices.DeleteFunc(e.Tags(), func(t string) bool { return strings.HasPrefix(t, TagReleaseFor) })
	parsed, _ := ParseEntry(append(tags, TagReleaseFor+e.OrphanedSince.Add(-time.Minute).UTC().Format(time.RFC3339)))
	return parsed
}
