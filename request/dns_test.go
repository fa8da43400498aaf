package request

import (
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestDNSTarget: which target annotation a Service holding 172.16.35.200
// gets, if any.
func TestDNSTarget(t *testing.T) {
	on, err := ipam.ParseConfig([]byte(planConfig))
	if err != nil {
		t.Fatal(err)
	}
	off, err := ipam.ParseConfig([]byte(planConfig + "dnsTarget: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	const host, hostLegacy = "external-dns.kubernetes.io/hostname", "external-dns.alpha.kubernetes.io/hostname"
	const target, targetLegacy = "external-dns.kubernetes.io/target", "external-dns.alpha.kubernetes.io/target"
	for _, tt := range []struct {
		name     string
		cfg      *ipam.Config
		ann      map[string]string
		recorded string
		key      string // "" for none
	}{
		{"a hostname, external-dns v0.22's prefix", on, map[string]string{host: "api.dc.example"}, "", target},
		{"a hostname, the older prefix", on, map[string]string{hostLegacy: "api.dc.example"}, "", targetLegacy},
		{"no hostname", on, map[string]string{"team": "a"}, "", ""},
		{"the user's target", on, map[string]string{hostLegacy: "api.dc.example", targetLegacy: "lb.dc.example"}, "", ""},
		{"the user's target, beside addresses written before", on, map[string]string{hostLegacy: "api.dc.example", targetLegacy: "lb.dc.example"}, "172.16.35.201", ""},
		{"the target written before, for addresses written before", on, map[string]string{hostLegacy: "api.dc.example", targetLegacy: "172.16.35.201"}, "172.16.35.201", targetLegacy},
		{"the pool file turns it off", off, map[string]string{host: "api.dc.example"}, "", ""},
	} {
		key, v, ok := DNSTarget(tt.cfg, tt.ann, tt.recorded, "172.16.35.200")
		if key != tt.key || ok != (tt.key != "") || (ok && v != "172.16.35.200") {
			t.Errorf("%s: %q=%q (%v), want key %q", tt.name, key, v, ok, tt.key)
		}
	}
}
