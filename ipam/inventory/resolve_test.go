package inventory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// otherProject is a Project the test credentials do not book in.
const otherProject = "2b7f4d1e-9c3a-4e5f-8a6b-7c8d9e0f1a2b"

func TestResolve(t *testing.T) {
	e := fixtures.NewWorld(t, fixtures.WorldOptions{
		Emulator: emulator.Options{ProjectID: fixtures.Project, SecretKey: emulator.TestSecretKey},
		PNs:      []string{"nodes=172.16.0.0/22", "one=172.16.32.0/22", "two=10.1.0.0/24,10.2.0.0/24"},
	})
	other, err := e.Srv.AddPrivateNetworkInProject(otherProject, "elsewhere", "172.16.36.0/22")
	if err != nil {
		t.Fatal(err)
	}
	e.PNs["elsewhere"] = other
	ctx := context.Background()
	resolve := func(pools string) error {
		c, err := ipam.ParseConfig([]byte(localrun.PoolFile("clusterName: test\nregion: fr-par\nclusterPrivateNetworkID: {{nodes}}\npools:\n"+pools, e.PNs)))
		if err != nil {
			t.Fatal(err)
		}
		return inventory.Resolve(ctx, e.Cloud, c)
	}
	if err := resolve(`  - {name: a, privateNetworkID: "{{one}}"}`); err != nil {
		t.Fatalf("single subnet inferred: %v", err)
	}
	if err := resolve(`  - {name: a, privateNetworkID: "{{one}}", ipFamily: IPv6}`); err != nil {
		t.Fatalf("the PN's IPv6 /64 inferred: %v", err)
	}
	if err := resolve(`  - {name: a, privateNetworkID: "{{two}}", subnet: 10.2.0.0/24, ranges: [10.2.0.10-10.2.0.20]}`); err != nil {
		t.Fatalf("named subnet: %v", err)
	}
	for _, tt := range []struct{ pools, want string }{
		{`  - {name: a, privateNetworkID: "{{two}}"}`, "several IPv4 subnets (10.1.0.0/24, 10.2.0.0/24"},
		{`  - {name: a, privateNetworkID: "{{one}}", subnet: 10.9.0.0/24}`, "10.9.0.0/24 is not a subnet of Private Network"},
		{`  - {name: a, privateNetworkID: "00000000-0000-4000-8000-000000000009"}`, "pools[0] (a).privateNetworkID: Private Network 00000000-0000-4000-8000-000000000009: not found"},
		{`  - {name: a, privateNetworkID: "{{one}}", ranges: ["172.16.40.1-172.16.40.9"]}`, "outside subnet 172.16.32.0/22"},
		{`  - {name: a, privateNetworkID: "{{one}}"}
  - {name: b, privateNetworkID: "{{one}}", ranges: ["172.16.33.1-172.16.33.9"]}`, `pools "a" and "b"`},
		// IPAM would refuse every booking there: the file is refused first,
		// naming both Projects.
		{`  - {name: a, privateNetworkID: "{{one}}"}
  - {name: b, privateNetworkID: "{{elsewhere}}"}`, "pools[1] (b).privateNetworkID: Private Network " + other.ID + " (elsewhere) is in Project " + otherProject + ", not in the credentials' Project " + fixtures.Project + " (SCW_DEFAULT_PROJECT_ID)"},
	} {
		err := resolve(tt.pools)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("pools %s: err = %v, want it to mention %q", tt.pools, err, tt.want)
		}
	}
}
