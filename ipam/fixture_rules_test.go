package ipam

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// The rules' fixture: cluster prod, which adopts from cluster old in pool
// dc; dc and dc-high share one subnet with disjoint ranges, general is not
// sticky (retention 0).
const rulesPoolFile = `
clusterName: prod
region: fr-par
clusterPrivateNetworkID: ` + pnC + `
pools:
  - name: dc
    privateNetworkID: ` + pnA + `
    subnet: 172.16.4.0/24
    ranges: ["172.16.4.10-172.16.4.20"]
    retention: 1h
    adoptFrom: [old]
  - name: dc-high
    privateNetworkID: ` + pnA + `
    subnet: 172.16.4.0/24
    ranges: ["172.16.4.100-172.16.4.120"]
    namespaces: [payments]
  - name: general
    privateNetworkID: ` + pnB + `
    default: true
    retention: "0"
`

const (
	subA = "sub-a" // pnA's subnet: dc and dc-high
	subB = "sub-b" // pnB's subnet: general
)

var (
	// rulesNow is a whole second: tags hold whole seconds, so entries
	// built around it read back unchanged.
	rulesNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	svcAPI   = types.NamespacedName{Namespace: "payments", Name: "api"}
	// rulesPolicy: a 20 s dead zone, a 30 s sweep, so RetryAfter is 50 s.
	rulesPolicy = Retention{PendingGrace: 10 * time.Minute, Margin: 20 * time.Second, SweepInterval: 30 * time.Second}
)

// rulesConfig is the fixture's pool file resolved against fixed Private
// Networks: resolveOn is Resolve's pure half, so no Cloud is needed for
// the pools' subnet IDs.
func rulesConfig(t *testing.T) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(rulesPoolFile))
	if err != nil {
		t.Fatal(err)
	}
	pns := map[string]*scaleway.PrivateNetwork{
		pnA: {ID: pnA, Name: "pn-a", Subnets: []scaleway.Subnet{{ID: subA, Prefix: netip.MustParsePrefix("172.16.4.0/24")}}},
		pnB: {ID: pnB, Name: "pn-b", Subnets: []scaleway.Subnet{{ID: subB, Prefix: netip.MustParsePrefix("10.0.0.0/24")}}},
	}
	for i, p := range cfg.Pools {
		if errs := p.resolveOn(i, pns[p.PrivateNetworkID], nil, "", "fr-par"); len(errs) > 0 {
			t.Fatalf("resolve %s: %v", p.Name, errs)
		}
	}
	return cfg
}

// rulesPool is one pool of the resolved fixture.
func rulesPool(t *testing.T, cfg *Config, name string) *Pool {
	t.Helper()
	p, ok := cfg.Pool(name)
	if !ok {
		t.Fatalf("no pool %s", name)
	}
	return p
}

// ledgerIP is an IP of subnet at addr carrying e's tags.
func ledgerIP(id, subnet, addr string, e Entry) *scaleway.IP {
	return &scaleway.IP{ID: id, SubnetID: subnet, Address: netip.MustParseAddr(addr), Tags: e.Tags()}
}

// retained is e retained since ago before rulesNow, released in from
// rulesNow (zero: no release-at, as an older version left it).
func retained(e Entry, ago, in time.Duration) Entry {
	e.OrphanedSince = rulesNow.Add(-ago)
	if in != 0 {
		e.ReleaseAt = rulesNow.Add(in)
	}
	return e
}
