package chart

import (
	"strings"
	"testing"
)

// TestSchemaAcceptsServiceSwitches: the switches of other implementations'
// words and of the DNS target, and the Gateway controllers, reach the pool
// file; a Gateway label the sweeper would not see is refused, as the binary
// refuses it.
func TestSchemaAcceptsServiceSwitches(t *testing.T) {
	out, err := renderRaw(t, []string{"ci/self-managed-values.yaml"}, "config.translateRequests=false", "config.dnsTarget=false",
		"config.gatewayControllers[0].namespace=envoy-gateway-system", "config.gatewayControllers[0].gatewayNamespaceLabel=gateway.envoyproxy.io/owning-gateway-namespace")
	for _, want := range []string{"translateRequests: false", "dnsTarget: false", "namespace: envoy-gateway-system", "gatewayNamespaceLabel: gateway.envoyproxy.io/owning-gateway-namespace"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("%q refused or dropped (err=%v):\n%s", want, err, out)
		}
	}
	if out, err := renderRaw(t, []string{"ci/self-managed-values.yaml"}, "config.gatewayControllers[0].namespace=eg", "config.gatewayControllers[0].gatewayNamespaceLabel=example.com/owner"); err == nil || !strings.Contains(out, "gatewayNamespaceLabel") {
		t.Fatalf("a label without \"gateway\" accepted (err=%v):\n%s", err, out)
	}
}
