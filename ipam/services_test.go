package ipam

import (
	"strings"
	"testing"
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
