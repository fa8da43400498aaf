package ipam

import (
	"os"
	"testing"
)

// FuzzParseConfig: any bytes give a config or an error, never a panic, and
// an accepted config keeps its promises: unique names, at most one default,
// ranges that hold addresses.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	if b, err := os.ReadFile("../examples/pools.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("clusterName: c\nregion: fr-par\nclusterPrivateNetworkID: " + pnC + "\npools:\n  - {name: a, privateNetworkID: " + pnA + ", ipFamily: IPv6, subnet: fd00::/64, ranges: [fd00::10-fd00::20]}\n"))
	f.Add([]byte("pools: [{name: a, ranges: [10.0.0.0/8]}]"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		names := map[string]bool{}
		defaults := 0
		for _, p := range c.Pools {
			if names[p.Name] {
				t.Fatalf("duplicate pool %q accepted", p.Name)
			}
			names[p.Name] = true
			if p.Default {
				defaults++
			}
			if p.PicksAddresses() && p.Prefix().IsValid() && p.Total() == 0 {
				t.Fatalf("pool %q picks from an empty set", p.Name)
			}
		}
		if defaults > 1 {
			t.Fatal("two default pools accepted")
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("an accepted config fails validation again: %v", err)
		}
	})
}
