package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

const statusSecret = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"

func statusWorld(t *testing.T) (*emulator.Server, StatusOptions, map[string]string) {
	t.Helper()
	srv := emulator.NewTestServer(t, emulator.Options{SecretKey: statusSecret})
	nodes, _ := srv.AddPrivateNetwork("nodes", "172.16.0.0/22")
	dc, _ := srv.AddPrivateNetwork("dc", "172.16.32.0/22")
	edge, _ := srv.AddPrivateNetwork("edge", "10.10.0.0/29")
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`clusterName: prod
region: fr-par
clusterPrivateNetworkID: %s
pools:
  - {name: dc-link, privateNetworkID: %s, ranges: ["172.16.35.10-172.16.35.19"], retention: 24h, maxPerNamespace: 3}
  - {name: edge, privateNetworkID: %s}
`, nodes.ID, dc.ID, edge.ID)), 0o600); err != nil {
		t.Fatal(err)
	}
	orphaned := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	ids := map[string]string{}
	add := func(key, pn, addr string, tags []string, res *emulator.Resource) {
		id, err := srv.AddIP(pn, netip.MustParseAddr(addr), tags, res)
		if err != nil {
			t.Fatal(err)
		}
		ids[key] = id
	}
	svc := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	add("api", dc.ID, "172.16.35.10", ipam.Entry{Cluster: "prod", Pool: "dc-link", Service: svc("payments", "api"), UID: "u1"}.Tags(),
		&emulator.Resource{Type: "lb_server", ID: "lb-1", Name: "api-lb"})
	add("old", dc.ID, "172.16.35.11", ipam.Entry{Cluster: "prod", Pool: "dc-link", Service: svc("payments", "old"), UID: "u2", OrphanedSince: orphaned}.Tags(), nil)
	add("staging", dc.ID, "172.16.35.12", ipam.Entry{Cluster: "staging", Pool: "dc-link", Service: svc("web", "front")}.Tags(), nil)
	add("vm", dc.ID, "172.16.35.13", nil, &emulator.Resource{Type: "instance_server", ID: "srv-1", Name: "bastion"})
	add("outside", dc.ID, "172.16.33.1", nil, nil) // on the PN, outside the pool's ranges
	add("edge", edge.ID, "10.10.0.2", ipam.Entry{Cluster: "prod", Pool: "edge", Service: svc("web", "edge")}.Tags(), nil)
	ids["pn:edge"] = edge.ID
	o := StatusOptions{ConfigFile: file, Output: "table", ScalewayOptions: []scw.ClientOption{
		scw.WithAPIURL(srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", statusSecret), scw.WithDefaultProjectID(emulator.DefaultProjectID)}}
	return srv, o, ids
}

func TestStatusTable(t *testing.T) {
	srv, o, ids := statusWorld(t)
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"cluster prod, region fr-par",
		fmt.Sprintf("dc-link  172.16.35.10  %s  Service payments/api, attached to lb_server api-lb", ids["api"]),
		fmt.Sprintf("dc-link  172.16.35.11  %s  retained until 2026-11-23T08:00:00Z (payments/old)", ids["old"]),
		fmt.Sprintf("dc-link  172.16.35.12  %s  Service web/front (cluster staging)", ids["staging"]),
		fmt.Sprintf("dc-link  172.16.35.13  %s  instance_server bastion", ids["vm"]),
		fmt.Sprintf("edge     10.10.0.2     %s  Service web/edge", ids["edge"]),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	// The pool line: 10 addresses, 2 ours (1 retained), 2 others, 6 free.
	if !strings.Contains(collapse(got), "dc-link "+mustPN(t, got)+" 172.16.32.0/22 172.16.35.10-172.16.35.19 10 2 2 1 6") {
		t.Errorf("dc-link summary wrong:\n%s", got)
	}
	if !strings.Contains(collapse(got), "edge") || !strings.Contains(collapse(got), "(IPAM chooses) 4 1 0 0 3") {
		t.Errorf("edge summary wrong:\n%s", got)
	}
	if strings.Contains(got, ids["outside"]) {
		t.Error("an address outside every pool is listed")
	}
	// Each namespace's use of each pool, this cluster's reservations only,
	// against the pool's share.
	for _, want := range []string{"POOL NAMESPACE HELD RETAINED SHARE dc-link payments 2 1 3 edge web 1 0 -"} {
		if !strings.Contains(collapse(got), want) {
			t.Errorf("namespace table lacks %q:\n%s", want, got)
		}
	}
	for op, n := range srv.Counts() {
		if op == emulator.OpBookIP || op == emulator.OpUpdateIP || op == emulator.OpReleaseIP {
			if n > 0 {
				t.Fatalf("status is read-only, but called %s", op)
			}
		}
	}
}

// collapse folds runs of spaces, so assertions ignore column widths.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func mustPN(t *testing.T, table string) string {
	for _, f := range strings.Fields(table) {
		if len(f) == 36 && strings.Count(f, "-") == 4 && strings.Contains(table, "dc-link  "+f) {
			return f
		}
	}
	t.Fatal("no private network ID in the table")
	return ""
}

func TestStatusJSON(t *testing.T) {
	_, o, ids := statusWorld(t)
	o.Output = "json"
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Pools []inventory.PoolReport `json:"pools"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	holders := map[string]inventory.AddressReport{}
	for _, p := range doc.Pools {
		for _, a := range p.Addresses {
			holders[a.IPID] = a
		}
	}
	if h := holders[ids["old"]]; !h.Mine || h.RetainedUntil.IsZero() || h.Holder != "Service payments/old" {
		t.Errorf("retained: %+v", h)
	}
	if h := holders[ids["staging"]]; h.Mine || h.Holder != "Service web/front (cluster staging)" {
		t.Errorf("other cluster: %+v", h)
	}
	if doc.Pools[0].Free != 6 || doc.Pools[0].UsedByOthers != 2 {
		t.Errorf("dc-link: %+v", doc.Pools[0].PoolStats)
	}
}

// TestStatusNamesBringYourOwnUsers: IPAM does not know who uses a
// bring-your-own IP; with the cluster's Services, status says.
func TestStatusNamesBringYourOwnUsers(t *testing.T) {
	srv, o, ids := statusWorld(t)
	byo, err := srv.AddIP(ids["pn:edge"], netip.MustParseAddr("10.10.0.3"), []string{"reserved-by-terraform"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := fixtures.Service("web", "byo", map[string]string{ccm.AnnotationPrivateIPIDs: byo})
	o.Services = fixtures.FakeKube().WithObjects(svc).Build()
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("edge     10.10.0.3     %s  Service web/byo (bring-your-own)", byo); !strings.Contains(out.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, out.String())
	}
	if want := fmt.Sprintf("%s  instance_server bastion", ids["vm"]); !strings.Contains(out.String(), want) || strings.Contains(out.String(), "--kubeconfig") {
		t.Fatalf("table:\n%s", out.String())
	}
}

func TestStatusErrors(t *testing.T) {
	srv, o, _ := statusWorld(t)
	wrongSecret := "00000000-1111-4222-8333-444444444444"
	bad := o
	bad.ScalewayOptions = []scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", wrongSecret), scw.WithDefaultProjectID(emulator.DefaultProjectID)}
	err := Status(context.Background(), bad, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "the API key is refused: unknown, revoked or expired") || strings.Contains(err.Error(), wrongSecret) {
		t.Errorf("wrong credentials: %v", err)
	}
	missing := o
	missing.ConfigFile = filepath.Join(t.TempDir(), "nope.yaml")
	if err := Status(context.Background(), missing, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "reading the pool file") {
		t.Errorf("missing pool file: %v", err)
	}
	if _, err := ParseStatusFlags([]string{"-o", "yaml"}); err == nil || !strings.Contains(err.Error(), "table or json") {
		t.Errorf("-o yaml: %v", err)
	}
}

// TestStatusShowsConvergence: with the cluster's Services, each address a
// live Service references shows whether its Load Balancer has it, judged
// as the sweeper judges it, and the IDs IPAM no longer has are listed.
func TestStatusShowsConvergence(t *testing.T) {
	srv, o, ids := statusWorld(t)
	const deadID = "0b9e2c61-3d4f-4a5b-9c6d-7e8f9a0b1c2d"
	lbSvc := func(ns, name, lb string, ingress []string, ids ...string) *corev1.Service {
		svc := fixtures.PrivateService(ns, name, map[string]string{
			ccm.AnnotationPrivateIPIDs: strings.Join(ids, ","), request.AnnotationAddresses: "172.16.35.99"})
		if lb != "" {
			svc.Annotations[ccm.AnnotationLoadBalancerID] = "fr-par-1/" + lb
		}
		for _, in := range ingress {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return svc
	}
	o.Services = fixtures.FakeKube().WithObjects(
		lbSvc("payments", "api", "lb-1", []string{"172.16.35.10"}, ids["api"]),
		lbSvc("web", "edge", "lb-2", nil, ids["edge"]), // an old CCM
		lbSvc("web", "vm", "lb-3", nil, ids["vm"]),     // held by an instance
		lbSvc("payments", "old", "", nil, ids["old"]),  // no Load Balancer yet
		lbSvc("payments", "dead", "lb-4", nil, deadID), // released out of band
	).Build()
	srv.ResetCounts()
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	got := collapse(out.String())
	for _, want := range []string{
		"POOL ADDRESS IPAM ID HOLDER CONVERGENCE",
		ids["api"] + " Service payments/api, attached to lb_server api-lb " + sweeper.ConvergenceApplied,
		ids["edge"] + " Service web/edge " + sweeper.ReasonNotAttached,
		ids["vm"] + " Service web/vm (bring-your-own), attached to instance_server bastion " + sweeper.ReasonAttachedElsewhere,
		ids["old"] + " retained until 2026-11-23T08:00:00Z (payments/old) " + sweeper.ConvergencePending,
		ids["staging"] + " Service web/front (cluster staging) -",
		"SERVICE IPAM ID (OUTSIDE THE POOLS) CONVERGENCE payments/dead " + deadID + " " + sweeper.ReasonGone,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// Only the ID the listing lacks is read.
	if n := srv.Count(emulator.OpGetIP); n != 1 {
		t.Errorf("%d GetIP calls, want 1 (the ID not in the pools' listing)", n)
	}

	o.Output = "json"
	out.Reset()
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Pools []inventory.PoolReport `json:"pools"`
		Gone  []struct {
			Service, IPAMID, Convergence string
		} `json:"unlistedIDs"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	conv := map[string]string{}
	for _, p := range doc.Pools {
		for _, a := range p.Addresses {
			conv[a.IPID] = a.Convergence
		}
	}
	if conv[ids["api"]] != "applied" || conv[ids["edge"]] != "not_attached" || conv[ids["staging"]] != "" {
		t.Errorf("convergence in json: %v", conv)
	}
	if len(doc.Gone) != 1 || doc.Gone[0].Service != "payments/dead" || doc.Gone[0].Convergence != "gone_from_ipam" {
		t.Errorf("unlistedIDs: %+v\n%s", doc.Gone, out.String())
	}
}

// TestStatusShowsAnUnreadableIDAsUnknown: an ID these credentials cannot
// read (another team's, a 403) shows why, and the rest is still shown.
func TestStatusShowsAnUnreadableIDAsUnknown(t *testing.T) {
	srv, o, ids := statusWorld(t)
	const foreignID = "0b9e2c61-3d4f-4a5b-9c6d-7e8f9a0b1c2d"
	svc := func(name, id string) *corev1.Service {
		return fixtures.PrivateService("payments", name, map[string]string{
			ccm.AnnotationPrivateIPIDs: id, request.AnnotationAddresses: "172.16.35.99", ccm.AnnotationLoadBalancerID: "fr-par-1/lb-1"})
	}
	o.Services = fixtures.FakeKube().WithObjects(svc("api", ids["edge"]), svc("foreign", foreignID)).Build()
	srv.FailNext(emulator.OpGetIP, 1, emulator.Fault{Status: http.StatusForbidden})
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatalf("status aborted on one unreadable ID: %v", err)
	}
	got := collapse(out.String())
	for _, want := range []string{
		ids["edge"] + " Service web/edge " + sweeper.ReasonNotAttached,
		"payments/foreign " + foreignID + " unknown (",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStatusReadsTheReleaseTime: "retained until" is the ledger's
// release-at, written by the sweeper with the install's pending grace
// (here 30 min, not the default 10) or brought forward by a full pool;
// status has neither the install's flags nor its clock to compute it.
// A reservation retained by an older version (no release-at yet) is
// computed with --pending-grace.
func TestStatusReadsTheReleaseTime(t *testing.T) {
	srv, o, _ := statusWorld(t)
	cfg, _, err := loadConfig(o.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	orphaned := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	svc := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "payments", Name: name} }
	for addr, e := range map[string]ipam.Entry{
		"172.16.35.15": {Service: svc("pending"), OrphanedSince: orphaned, ReleaseAt: orphaned.Add(30 * time.Minute)},
		"172.16.35.16": {Service: svc("yielding"), UID: "u", OrphanedSince: orphaned, ReleaseAt: orphaned.Add(2 * time.Hour)},
		"172.16.35.17": {Service: svc("older"), OrphanedSince: orphaned},
	} {
		e.Cluster, e.Pool = "prod", "dc-link"
		if _, err := srv.AddIP(cfg.Pools[0].PrivateNetworkID, netip.MustParseAddr(addr), e.Tags(), nil); err != nil {
			t.Fatal(err)
		}
	}
	o.PendingGrace = 20 * time.Minute
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"retained until 2026-11-22T08:30:00Z (payments/pending)",
		"retained until 2026-11-22T10:00:00Z (payments/yielding)",
		"retained until 2026-11-22T08:20:00Z (payments/older)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStatusCountsByTheNamespaceTag: a namespace's use of a pool is
// counted by the ledger's namespace tag, as its share is: a Gateway's
// reservation (its Service in the controller's namespace) counts in the
// Gateway's namespace.
func TestStatusCountsByTheNamespaceTag(t *testing.T) {
	srv, o, _ := statusWorld(t)
	cfg, _, err := loadConfig(o.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	gw := ipam.Entry{Cluster: "prod", Pool: "dc-link", Service: types.NamespacedName{Namespace: "envoy-gateway-system", Name: "envoy-payments-web"}, Namespace: "payments", UID: "u9"}
	if _, err := srv.AddIP(cfg.Pools[0].PrivateNetworkID, netip.MustParseAddr("172.16.35.15"), gw.Tags(), nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	// payments holds api and old, and the Gateway's: 3 of its share of 3.
	if !regexpLine(out.String(), `dc-link\s+payments\s+3\s+1\s+3`) {
		t.Errorf("payments' use of dc-link is not 3 held, 1 retained, share 3:\n%s", out.String())
	}
	if regexpLine(out.String(), `dc-link\s+envoy-gateway-system\s+1`) {
		t.Errorf("the Gateway's reservation counts in its controller's namespace:\n%s", out.String())
	}
}

// regexpLine reports whether a line of out matches pattern.
func regexpLine(out, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// TestStatusShowsAStrandedReservation: a retained reservation still
// attached to a Load Balancer past the convergence grace is marked, as the
// sweeper reports it; one retained a moment ago is not.
func TestStatusShowsAStrandedReservation(t *testing.T) {
	srv, o, _ := statusWorld(t)
	cfg, _, err := loadConfig(o.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	for addr, ago := range map[string]time.Duration{"172.16.35.15": time.Hour, "172.16.35.16": time.Second} {
		since := time.Now().Add(-ago).Truncate(time.Second)
		e := ipam.Entry{Cluster: "prod", Pool: "dc-link", Service: types.NamespacedName{Namespace: "payments", Name: "gone-" + addr}, UID: "u", OrphanedSince: since, ReleaseAt: since.Add(24 * time.Hour)}
		if _, err := srv.AddIP(cfg.Pools[0].PrivateNetworkID, netip.MustParseAddr(addr), e.Tags(), &emulator.Resource{Type: "lb_server", ID: "lb-" + addr, Name: "left-behind"}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !regexpLine(out.String(), `172\.16\.35\.15 .*payments/gone-172\.16\.35\.15.*STRANDED`) || regexpLine(out.String(), `172\.16\.35\.16 .*STRANDED`) {
		t.Errorf("want 172.16.35.15 stranded and 172.16.35.16 not:\n%s", out.String())
	}
	// The install's longer --convergence-grace: neither yet.
	o.ConvergenceGrace = 2 * time.Hour
	out.Reset()
	if err := Status(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "STRANDED") {
		t.Errorf("with a 2h grace, an address marked stranded:\n%s", out.String())
	}
}
