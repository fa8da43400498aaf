package request

import (
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestJudgedNamespace: the owning Gateway's namespace is read from the
// label only in a Gateway controller's namespace the pool file names.
func TestJudgedNamespace(t *testing.T) {
	const label = "gateway.envoyproxy.io/owning-gateway-namespace"
	cfg, err := ipam.ParseConfig([]byte(planConfig + "gatewayControllers:\n  - {namespace: envoy-gateway-system, gatewayNamespaceLabel: " + label + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, ns string
		labels   map[string]string
		want     string
	}{
		{"a Gateway's Service in the controller's namespace", "envoy-gateway-system", map[string]string{label: "payments"}, "payments"},
		{"the controller's namespace, no label", "envoy-gateway-system", nil, "envoy-gateway-system"},
		{"the controller's namespace, a label that names no namespace", "envoy-gateway-system", map[string]string{label: "Payments!"}, "envoy-gateway-system"},
		{"a labelled Service in a namespace the pool file does not name", "web", map[string]string{label: "payments"}, "web"},
		{"another controller's label", "envoy-gateway-system", map[string]string{"gateway.istio.io/owning-namespace": "payments"}, "envoy-gateway-system"},
	} {
		if got := JudgedNamespace(cfg, tt.ns, func(k string) string { return tt.labels[k] }); got != tt.want {
			t.Errorf("%s: judged by %q, want %q", tt.name, got, tt.want)
		}
	}
}
