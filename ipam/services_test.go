package ipam

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// TestServiceSwitches: translation and the DNS target are on unless the
// file turns them off; a Gateway controller's label is found by its
// namespace only.
func TestServiceSwitches(t *testing.T) {
	c, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Translates() || !c.WritesDNSTarget() || c.GatewayLabel("envoy-gateway-system") != "" {
		t.Fatalf("defaults: translates=%v dnsTarget=%v gateway label %q", c.Translates(), c.WritesDNSTarget(), c.GatewayLabel("envoy-gateway-system"))
	}
	c, err = ParseConfig([]byte(validConfig + "translateRequests: false\ndnsTarget: false\ngatewayControllers:\n  - {namespace: envoy-gateway-system, gatewayNamespaceLabel: gateway.envoyproxy.io/owning-gateway-namespace}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Translates() || c.WritesDNSTarget() {
		t.Fatalf("switched off: translates=%v dnsTarget=%v", c.Translates(), c.WritesDNSTarget())
	}
	if got := c.GatewayLabel("envoy-gateway-system"); got != "gateway.envoyproxy.io/owning-gateway-namespace" {
		t.Fatalf("label of envoy-gateway-system = %q", got)
	}
	if got := c.GatewayLabel("payments"); got != "" {
		t.Fatalf("label of payments = %q, want none", got)
	}
}

func TestGatewayControllersErrors(t *testing.T) {
	for name, tt := range map[string]struct {
		entries string
		want    []string
	}{
		"no namespace":                      {"  - {gatewayNamespaceLabel: gateway.envoyproxy.io/owning-gateway-namespace}\n", []string{"gatewayControllers[0].namespace", "not a namespace name", "envoy-gateway-system"}},
		"bad label":                         {"  - {namespace: envoy-gateway-system, gatewayNamespaceLabel: 'owning gateway'}\n", []string{"gatewayControllers[0].gatewayNamespaceLabel", `"owning gateway" is not a label key`}},
		"listed twice":                      {"  - {namespace: eg, gatewayNamespaceLabel: gateway/b}\n  - {namespace: eg, gatewayNamespaceLabel: gateway/c}\n", []string{"gatewayControllers[1].namespace", "listed twice"}},
		"a label the sweeper would not see": {"  - {namespace: eg, gatewayNamespaceLabel: example.com/owner-namespace}\n", []string{"gatewayControllers[0].gatewayNamespaceLabel", `does not contain "gateway"`, "not by the sweeper"}},
		"unknown field":                     {"  - {namespace: eg, label: a/b}\n", []string{"unknown field", "label"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(validConfig + "gatewayControllers:\n" + tt.entries))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestGatewayShareTag: a reservation of a Gateway's Service counts in its
// Gateway's namespace: the tag says so through a rewrite, the entry is
// complete (the sweeper leaves it), and the share of that namespace counts
// it, not the controller namespace's.
func TestGatewayShareTag(t *testing.T) {
	c, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := c.Pool("dc-link")
	e := Entry{Cluster: "prod-par", Pool: "dc-link", Service: types.NamespacedName{Namespace: "envoy-gateway-system", Name: "envoy-payments-edge-3c1f0a2b"}, Namespace: "payments"}
	got, ok := ParseEntry(e.Tags())
	if !ok || got.Namespace != "payments" || got.JudgedNamespace() != "payments" || !got.Complete() {
		t.Fatalf("read back %+v (complete %v)", got, got.Complete())
	}
	ip := Read(&scaleway.IP{Tags: got.Tags(), Address: netip.MustParseAddr("172.16.4.210")}, time.Now())
	if !InShare("prod-par", "payments", pool, ip) || InShare("prod-par", "envoy-gateway-system", pool, ip) {
		t.Fatalf("counted in payments' share %v, in the controller's %v; want payments' only",
			InShare("prod-par", "payments", pool, ip), InShare("prod-par", "envoy-gateway-system", pool, ip))
	}
	// A reservation booked before the tag existed counts in its Service's.
	if old := (Entry{Service: e.Service}); old.JudgedNamespace() != "envoy-gateway-system" || old.Complete() {
		t.Fatalf("untagged: share namespace %q, complete %v", old.JudgedNamespace(), old.Complete())
	}
}
