package ipam

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The pool file's switches of how Services are read and written besides
// the pools: the request words of other implementations, the DNS target
// for external-dns, and the Gateway controllers whose Services are judged
// by their Gateway's namespace.

// GatewayController names a namespace where a Gateway API controller
// (Envoy Gateway's envoy-gateway-system) creates the Services of Gateways
// that live elsewhere, and the label it puts on each with the namespace of
// the Gateway that owns it.
type GatewayController struct {
	// Namespace is where the controller creates the Services
	// (envoy-gateway-system).
	// +required
	// +schema: {"pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"}
	Namespace string `json:"namespace"`
	// GatewayNamespaceLabel is the label the controller puts on each
	// Service with the namespace of the Gateway that owns it
	// (gateway.envoyproxy.io/owning-gateway-namespace). It must contain
	// "gateway": the Service cache keeps only such labels.
	// +required
	// +schema: {"pattern": "gateway"}
	GatewayNamespaceLabel string `json:"gatewayNamespaceLabel"`
}

// Translates reports whether other implementations' request annotations
// and spec.loadBalancerIP are read as this project's own (translateRequests,
// on unless the file sets false).
func (c *Config) Translates() bool { return c.TranslateRequests == nil || *c.TranslateRequests }

// WritesDNSTarget reports whether a Service that asks external-dns for a
// name gets its reserved addresses as the target (dnsTarget, on unless
// the file sets false).
func (c *Config) WritesDNSTarget() bool { return c.DNSTarget == nil || *c.DNSTarget }

// GatewayLabel is the label carrying the owning Gateway's namespace on the
// Services of namespace, "" when namespace is no Gateway controller's.
func (c *Config) GatewayLabel(namespace string) string {
	for _, g := range c.GatewayControllers {
		if g.Namespace == namespace {
			return g.GatewayNamespaceLabel
		}
	}
	return ""
}

// checkGatewayControllers refuses an entry without a namespace or label, a
// label that is not a Kubernetes label key, and a namespace listed twice.
func (c *Config) checkGatewayControllers() (errs []error) {
	var seen []string
	for i, g := range c.GatewayControllers {
		where := fmt.Sprintf("gatewayControllers[%d]", i)
		if msgs := validation.IsDNS1123Label(g.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.namespace: %q is not a namespace name; write the namespace the Gateway controller creates its Services in, such as envoy-gateway-system", where, g.Namespace))
		} else if slices.Contains(seen, g.Namespace) {
			errs = append(errs, fmt.Errorf("%s.namespace: %q is listed twice; list each controller namespace once", where, g.Namespace))
		}
		seen = append(seen, g.Namespace)
		switch {
		case len(validation.IsQualifiedName(g.GatewayNamespaceLabel)) > 0:
			errs = append(errs, fmt.Errorf("%s.gatewayNamespaceLabel: %q is not a label key; write the label that carries the owning Gateway's namespace, such as gateway.envoyproxy.io/owning-gateway-namespace", where, g.GatewayNamespaceLabel))
		case !strings.Contains(g.GatewayNamespaceLabel, "gateway"):
			// The Service informer keeps only such labels of a Service
			// (ccm.keptLabel): the sweeper would not see another.
			errs = append(errs, fmt.Errorf("%s.gatewayNamespaceLabel: %q does not contain \"gateway\"; scw-lb-ipam keeps only such labels of the Services it watches, so this label would be read at admission but not by the sweeper", where, g.GatewayNamespaceLabel))
		}
	}
	return errs
}
