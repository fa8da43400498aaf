package request

import (
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// JudgedNamespace is the namespace a Service's request is judged by (the
// pools' namespaces): the owning Gateway's, when the Service lives in a
// Gateway controller's namespace the pool file names (gatewayControllers)
// and carries that controller's label with a namespace name; otherwise the
// Service's own. The label is trusted only there: anyone may set it on a
// Service of their own namespace. label reads one of the Service's labels.
// Admission and the sweeper's report both read this one rule.
func JudgedNamespace(cfg *ipam.Config, namespace string, label func(key string) string) string {
	if len(cfg.GatewayControllers) == 0 {
		return namespace // no controller named: every Service is its own
	}
	key := cfg.GatewayLabel(namespace)
	if key == "" {
		return namespace
	}
	if v := label(key); len(validation.IsDNS1123Label(v)) == 0 {
		return v
	}
	return namespace
}
