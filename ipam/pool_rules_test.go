package ipam

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPoolOfID(t *testing.T) {
	cfg := rulesConfig(t)
	for _, tc := range []struct {
		name      string
		namespace string
		subnet    string
		addr      string
		want      string // "" for none
		allowed   string
	}{
		{"the later pool whose ranges hold it", "payments", subA, "172.16.4.105", "dc-high", "dc,dc-high,general"},
		{"the first pool whose ranges hold it", "payments", subA, "172.16.4.15", "dc", "dc,dc-high,general"},
		{"no ranges hold it: the first on its subnet", "payments", subA, "172.16.4.50", "dc", "dc,dc-high,general"},
		{"a pool the namespace may not use is skipped", "web", subA, "172.16.4.105", "dc", "dc,general"},
		{"a pool that takes the whole subnet", "web", subB, "10.0.0.9", "general", "dc,general"},
		{"no pool on its subnet", "payments", "sub-x", "192.168.0.9", "", "dc,dc-high,general"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, allowed := cfg.PoolOfID(tc.namespace, tc.subnet, netip.MustParseAddr(tc.addr))
			got := ""
			if pool != nil {
				got = pool.Name
			}
			if got != tc.want {
				t.Errorf("pool %q, want %q", got, tc.want)
			}
			if strings.Join(allowed, ",") != tc.allowed {
				t.Errorf("allowed %v, want %s", allowed, tc.allowed)
			}
		})
	}
}
