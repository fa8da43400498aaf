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
	const private, useHostname = "service.beta.kubernetes.io/scw-loadbalancer-private", "service.beta.kubernetes.io/scw-loadbalancer-use-hostname"
	priv := func(kv ...string) map[string]string {
		m := map[string]string{private: "true"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	const written = "172.16.35.200"
	for _, tt := range []struct {
		name     string
		cfg      *ipam.Config
		ann      map[string]string
		recorded string
		want     TargetEdit
		ok       bool
	}{
		{"a hostname, external-dns v0.22's prefix", on, priv(host, "api.dc.example"), "", TargetEdit{target, written}, true},
		{"a hostname, the older prefix", on, priv(hostLegacy, "api.dc.example"), "", TargetEdit{targetLegacy, written}, true},
		{"private as the CCM reads it: True", on, priv(private, "True", host, "api.dc.example"), "", TargetEdit{target, written}, true},
		{"no hostname", on, priv("team", "a"), "", TargetEdit{}, false},
		{"the user's target", on, priv(hostLegacy, "api.dc.example", targetLegacy, "lb.dc.example"), "", TargetEdit{}, false},
		{"the user's target, beside addresses written before", on, priv(hostLegacy, "api.dc.example", targetLegacy, "lb.dc.example"), "172.16.35.201", TargetEdit{}, false},
		{"the target written before, for addresses written before", on, priv(hostLegacy, "api.dc.example", targetLegacy, "172.16.35.201"), "172.16.35.201", TargetEdit{targetLegacy, written}, true},
		{"the pool file turns it off", off, priv(host, "api.dc.example"), "", TargetEdit{}, false},
		{"turned off, the target written before is removed on a move", off, priv(host, "api.dc.example", target, "172.16.35.201"), "172.16.35.201", TargetEdit{Key: target}, true},
		{"turned off, a target naming the kept addresses may be the user's", off, priv(host, "api.dc.example", target, written), written, TargetEdit{}, false},
		{"public: the status lists its public IPs", on, map[string]string{host: "api.example.com"}, "", TargetEdit{}, false},
		{"public, private false", on, map[string]string{private: "false", host: "api.example.com"}, "", TargetEdit{}, false},
		{"public, the target written before is removed", on, map[string]string{host: "api.example.com", target: written}, written, TargetEdit{Key: target}, true},
		{"use-hostname: the status lists a hostname", on, priv(useHostname, "1", host, "api.dc.example"), "", TargetEdit{}, false},
	} {
		got, ok := DNSTarget(tt.cfg, tt.ann, tt.recorded, written)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %+v (%v), want %+v (%v)", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
