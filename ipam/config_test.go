package ipam

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
)

const (
	pnA = "11111111-1111-4111-8111-111111111111"
	pnB = "22222222-2222-4222-8222-222222222222"
	pnC = "33333333-3333-4333-8333-333333333333"
)

const validConfig = `
clusterName: prod-par
region: fr-par
clusterPrivateNetworkID: ` + pnC + `
pools:
  - name: dc-link
    privateNetworkID: ` + pnA + `
    subnet: 172.16.4.0/22
    ipFamily: IPv4
    ranges: ["172.16.4.200-172.16.4.250", "172.16.5.0/28"]
    exclude: ["172.16.4.201"]
    namespaces: ["payments", "edge-*"]
    autoAssign: true
    default: false
    disabled: false
    retention: 24h
  - name: general
    privateNetworkID: ` + pnB + `
    default: true
    retention: 7d
`

func TestParseConfigValid(t *testing.T) {
	c, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Pool("dc-link")
	if !ok {
		t.Fatal("dc-link missing")
	}
	if got, want := p.Total(), uint64(51+16-1); got != want {
		t.Errorf("dc-link total = %d, want %d", got, want)
	}
	if !p.PicksAddresses() || p.Retention.Duration != 24*time.Hour {
		t.Errorf("dc-link picks=%v retention=%v", p.PicksAddresses(), p.Retention)
	}
	g, _ := c.Pool("general")
	if g.IPFamily != IPv4 || g.PicksAddresses() || g.Retention.Duration != 7*24*time.Hour || !g.AutoAssigns() {
		t.Errorf("general defaults: family=%s picks=%v retention=%v auto=%v", g.IPFamily, g.PicksAddresses(), g.Retention, g.AutoAssigns())
	}
	if c.DefaultPool() != g {
		t.Errorf("default pool = %v", c.DefaultPool())
	}
	for ns, want := range map[string][]string{"payments": {"dc-link", "general"}, "edge-eu": {"dc-link", "general"}, "web": {"general"}} {
		var got []string
		for _, p := range c.AllowedPools(ns) {
			got = append(got, p.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("AllowedPools(%s) = %v, want %v", ns, got, want)
		}
	}
}

func TestParseConfigAdoptFrom(t *testing.T) {
	c, err := ParseConfig([]byte(strings.Replace(validConfig, "    retention: 7d\n", "    retention: 7d\n    adoptFrom: [prod-par-old, blue]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := c.Pool("general")
	if strings.Join(g.AdoptFrom, ",") != "prod-par-old,blue" {
		t.Fatalf("adoptFrom = %v", g.AdoptFrom)
	}
}

func TestPoolDefaultsRetention(t *testing.T) {
	c, err := ParseConfig([]byte(strings.Replace(validConfig, "    retention: 7d\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := c.Pool("general")
	if g.Retention.Duration != DefaultRetention {
		t.Fatalf("retention = %v, want %v", g.Retention, DefaultRetention)
	}
}

// TestPoolRetentionZero: "not sticky" as docs/pool-file.md writes it, 0
// unquoted (a YAML number), "0" and "0s", is a retention of 0, not the
// default; any other bare number is refused, saying what a duration is.
func TestPoolRetentionZero(t *testing.T) {
	for _, v := range []string{"0", `"0"`, "0s", `"0s"`} {
		c, err := ParseConfig([]byte(strings.Replace(validConfig, "    retention: 7d\n", "    retention: "+v+"\n", 1)))
		if err != nil {
			t.Fatalf("retention: %s: %v", v, err)
		}
		if g, _ := c.Pool("general"); g.Retention.Duration != 0 {
			t.Fatalf("retention: %s read as %v", v, g.Retention)
		}
	}
	_, err := ParseConfig([]byte(strings.Replace(validConfig, "    retention: 7d\n", "    retention: 3600\n", 1)))
	if err == nil || !strings.Contains(err.Error(), "a bare number is read only as 0") {
		t.Fatalf("retention: 3600: %v", err)
	}
}

// TestPoolLongestRetention: the longest retention in each unit is kept
// as written; one unit more is refused (TestParseConfigErrors), not
// wrapped around to minutes.
func TestPoolLongestRetention(t *testing.T) {
	for _, tt := range []struct {
		retention string
		want      time.Duration
	}{
		{"106751d", 106751 * 24 * time.Hour},
		{"2562047h", 2562047 * time.Hour},
		{"2562047h47m16.854775807s", time.Duration(math.MaxInt64)},
	} {
		c, err := ParseConfig([]byte(strings.Replace(validConfig, "    retention: 7d\n", "    retention: "+tt.retention+"\n", 1)))
		if err != nil {
			t.Fatalf("retention %s: %v", tt.retention, err)
		}
		if g, _ := c.Pool("general"); g.Retention.Duration != tt.want {
			t.Errorf("retention %s = %v, want %v", tt.retention, g.Retention, tt.want)
		}
	}
}

// fileWith is a valid pool file's head followed by pools, as poolYAML
// writes them.
func fileWith(pools string) string {
	return "clusterName: prod-par\nregion: fr-par\nclusterPrivateNetworkID: " + pnC + "\npools:\n" + pools
}

// poolYAML is a pool file's entry for pool name on private network pn,
// with the extra fields given.
func poolYAML(name, pn string, extra ...string) string {
	s := "  - name: " + name + "\n    privateNetworkID: " + pn + "\n"
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

// configErrors are pool files ParseConfig refuses, each with what its
// error must say.
var configErrors = []struct {
	name string
	file string
	want []string // each must appear in the error
}{
	{"not yaml", "pools: [", []string{"pool file"}},
	{"unknown top-level field", fileWith(poolYAML("a", pnA)) + "colour: blue\n", []string{"unknown field", "colour"}},
	{"unknown pool field", fileWith(poolYAML("a", pnA, "rangez: []")), []string{"unknown field", "rangez"}},
	{"missing cluster name", strings.Replace(fileWith(poolYAML("a", pnA)), "clusterName: prod-par", "clusterName: \"\"", 1), []string{"clusterName: required"}},
	{"bad cluster name", strings.Replace(fileWith(poolYAML("a", pnA)), "prod-par", "Prod_Par", 1), []string{"clusterName", "DNS label"}},
	{"bad region", strings.Replace(fileWith(poolYAML("a", pnA)), "fr-par", "mars-1", 1), []string{"region", "mars-1", "fr-par, nl-ams"}},
	{"bad cluster PN", strings.Replace(fileWith(poolYAML("a", pnA)), pnC, "nope", 1), []string{"clusterPrivateNetworkID", "nope"}},
	{"no pools", fileWith(""), []string{"pools: at least one pool"}},
	{"bad pool name", fileWith(poolYAML("DC_link", pnA)), []string{"pools[0] (DC_link).name", "DNS label"}},
	{"missing PN", fileWith("  - name: a\n"), []string{"pools[0] (a).privateNetworkID"}},
	{"duplicate names", fileWith(poolYAML("a", pnA) + poolYAML("a", pnB)), []string{"pools[1] (a).name", "pools[0]", "unique"}},
	{"two defaults", fileWith(poolYAML("a", pnA, "default: true") + poolYAML("b", pnB, "default: true")), []string{"2 pools are marked default (a, b)"}},
	{"bad family", fileWith(poolYAML("a", pnA, "ipFamily: IPv5")), []string{"pools[0] (a).ipFamily", "IPv5", "IPv4 or IPv6"}},
	{"subnet not CIDR", fileWith(poolYAML("a", pnA, "subnet: 172.16.4.0")), []string{"pools[0] (a).subnet", "not a CIDR"}},
	{"subnet host bits", fileWith(poolYAML("a", pnA, "subnet: 172.16.4.1/22")), []string{"host bits", "172.16.4.0/22"}},
	{"subnet wrong family", fileWith(poolYAML("a", pnA, "subnet: fd00::/64")), []string{"not an IPv4 subnet"}},
	{"range not parseable", fileWith(poolYAML("a", pnA, "subnet: 172.16.4.0/22", `ranges: ["172.16.4.9-"]`)), []string{"ranges[0]", "not an address"}},
	{"range outside subnet", fileWith(poolYAML("a", pnA, "subnet: 172.16.4.0/22", `ranges: ["172.16.8.1-172.16.8.9"]`)), []string{"pools[0] (a).ranges[0]", "outside subnet 172.16.4.0/22"}},
	{"range wrong family", fileWith(poolYAML("a", pnA, `ranges: ["fd00::1-fd00::9"]`)), []string{"ranges[0]", "not IPv4"}},
	{"exclude wrong family", fileWith(poolYAML("a", pnA, `exclude: ["fd00::1"]`)), []string{"exclude[0]", "not IPv4"}},
	{"everything excluded", fileWith(poolYAML("a", pnA, "subnet: 172.16.4.0/22", `ranges: ["172.16.4.10-172.16.4.11"]`, `exclude: ["172.16.4.10/31"]`)), []string{"leave no address"}},
	{"ipv6 range too wide", fileWith(poolYAML("a", pnA, "ipFamily: IPv6", "subnet: fd00::/64", `ranges: ["fd00::/80"]`)), []string{"more than"}},
	{"overlap on one PN", fileWith(poolYAML("a", pnA, "subnet: 172.16.4.0/22", `ranges: ["172.16.4.10-172.16.4.20"]`) + poolYAML("b", pnA, "subnet: 172.16.4.0/22", `ranges: ["172.16.4.20-172.16.4.30"]`)), []string{`pools "a" and "b"`, "overlap"}},
	{"ipv6 default", fileWith(poolYAML("a", pnA, "ipFamily: IPv6", "default: true")), []string{"pools[0] (a).default", "IPv6", "IPv4 status only"}},
	{"disabled default", fileWith(poolYAML("a", pnA, "default: true", "disabled: true")), []string{"disabled pool cannot be the default"}},
	{"manual default", fileWith(poolYAML("a", pnA, "default: true", "autoAssign: false")), []string{"autoAssign: false cannot be the default"}},
	{"negative retention", fileWith(poolYAML("a", pnA, "retention: -1h")), []string{"retention", "negative"}},
	{"bad retention", fileWith(poolYAML("a", pnA, "retention: soon")), []string{"soon", "24h"}},
	{"retention past the longest in days", fileWith(poolYAML("a", pnA, "retention: 213504d")), []string{`"213504d"`, "out of range", "the longest is 106751d"}},
	{"retention days past an int", fileWith(poolYAML("a", pnA, "retention: 99999999999999999999d")), []string{`"99999999999999999999d"`, "out of range", "106751d"}},
	{"retention past the longest in hours", fileWith(poolYAML("a", pnA, "retention: 2562048h")), []string{`"2562048h"`, "out of range", "the longest is 106751d"}},
	{"retention past the longest in a Go form", fileWith(poolYAML("a", pnA, "retention: 2562047h47m17s")), []string{`"2562047h47m17s"`, "out of range", "106751d"}},
	{"negative retention past the longest", fileWith(poolYAML("a", pnA, "retention: -2562048h")), []string{`"-2562048h"`, "out of range"}},
	{"negative share", fileWith(poolYAML("a", pnA, "maxPerNamespace: -1")), []string{"pools[0] (a).maxPerNamespace", "-1 is negative", "0 for no cap"}},
	{"negative default share", fileWith(poolYAML("a", pnA)) + "defaultMaxPerNamespace: -2\n", []string{"defaultMaxPerNamespace", "-2 is negative"}},
	{"bad namespace glob", fileWith(poolYAML("a", pnA, `namespaces: ["edge-["]`)), []string{"namespaces[0]", "edge-["}},
	{"adoptFrom not a name", fileWith(poolYAML("a", pnA, `adoptFrom: ["Old_Cluster"]`)), []string{"pools[0] (a).adoptFrom[0]", "Old_Cluster", "clusterName"}},
	{"adoptFrom twice", fileWith(poolYAML("a", pnA, `adoptFrom: ["old", "old"]`)), []string{"pools[0] (a).adoptFrom[1]", "adoptFrom[0]", "once"}},
	{"adoptFrom itself", fileWith(poolYAML("a", pnA, `adoptFrom: ["prod-par"]`)), []string{"pools[0] (a).adoptFrom[0]", "own clusterName", "remove it"}},
}

func TestParseConfigErrors(t *testing.T) {
	for _, tt := range configErrors {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.file))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestOverlapOnDistinctPNsIsFine(t *testing.T) {
	file := "clusterName: c\nregion: fr-par\nclusterPrivateNetworkID: " + pnC + "\npools:\n" +
		"  - {name: a, privateNetworkID: " + pnA + ", subnet: 172.16.4.0/22}\n" +
		"  - {name: b, privateNetworkID: " + pnB + ", subnet: 172.16.4.0/22}\n"
	if _, err := ParseConfig([]byte(file)); err != nil {
		t.Fatal(err)
	}
}

func TestPoolContainsSkipsReservedAddresses(t *testing.T) {
	file := "clusterName: c\nregion: fr-par\nclusterPrivateNetworkID: " + pnC + "\npools:\n" +
		"  - {name: a, privateNetworkID: " + pnA + ", subnet: 172.16.4.0/30, ranges: [172.16.4.0/30]}\n"
	_, err := ParseConfig([]byte(file))
	if err == nil || !strings.Contains(err.Error(), "leave no address") {
		t.Fatalf("a /30 has only reserved addresses; err = %v", err)
	}
}

// TestPoolExplain: a denial names the rule that keeps an address out.
func TestPoolExplain(t *testing.T) {
	cfg, err := ParseConfig([]byte(`clusterName: test
region: fr-par
clusterPrivateNetworkID: 3f1c1a52-6c2e-4b8f-9d7a-2b1e0c9d8f01
pools:
  - {name: dc-link, privateNetworkID: 7b6a5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d, subnet: 172.16.4.0/22, ranges: ["172.16.4.200-172.16.4.250"], exclude: ["172.16.4.201"]}
  - {name: whole, privateNetworkID: 8b6a5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d, subnet: 10.20.0.0/24}
`))
	if err != nil {
		t.Fatal(err)
	}
	dc, _ := cfg.Pool("dc-link")
	whole, _ := cfg.Pool("whole")
	for _, tt := range []struct {
		p    *Pool
		addr string
		want string
	}{
		{dc, "172.16.4.210", ""},
		{dc, "172.16.4.201", "172.16.4.201 is excluded from pool dc-link (exclude: 172.16.4.201)"},
		{dc, "172.16.4.10", "172.16.4.10 is outside pool dc-link's ranges 172.16.4.200-172.16.4.250"},
		{dc, "10.0.0.1", "10.0.0.1 is outside pool dc-link's subnet 172.16.4.0/22"},
		{whole, "10.20.0.1", "10.20.0.1 is reserved by Scaleway IPAM (the first two and last two addresses of 10.20.0.0/24)"},
		{whole, "10.20.0.254", "10.20.0.254 is reserved by Scaleway IPAM (the first two and last two addresses of 10.20.0.0/24)"},
	} {
		if got := tt.p.Explain(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("%s in %s: %q, want %q", tt.addr, tt.p.Name, got, tt.want)
		}
	}
}

// TestIsName: pool and cluster names are RFC 1123 labels, as annotations
// and IPAM tags need.
func TestIsName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "dc-link": true, "pool-2": true, "0": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "a-": false, "Dc": false, "dc_link": false, "dc.link": false, strings.Repeat("a", 64): false,
	} {
		if got := IsName(name); got != want {
			t.Errorf("IsName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestBindNotFoundNamesThePoolFilesRegion: a network not found is looked
// for in the pool file's region, which wins over SCW_DEFAULT_REGION: the
// error names that region and what to check, never the variable the
// lookup does not read.
func TestBindNotFoundNamesThePoolFilesRegion(t *testing.T) {
	c, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	notFound := &scw.ResourceNotFoundError{Resource: "private_network", ResourceID: c.ClusterPrivateNetworkID}
	err = c.Bind(Networks{Failed: map[string]error{c.ClusterPrivateNetworkID: notFound}})
	if err == nil || !strings.Contains(err.Error(), "not found in region "+c.Region+" (the pool file's region)") || strings.Contains(err.Error(), "SCW_DEFAULT_REGION") {
		t.Fatalf("Bind: %v", err)
	}
}
