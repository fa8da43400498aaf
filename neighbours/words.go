package neighbours

import (
	"slices"
	"strings"
)

// The requests of other load-balancer implementations and clouds, which
// package request reads as this project's own (request.Translate). They
// are listed here, below request, because a Record keeps them: the
// sweeper's report of unreserved Services reads a request as admission
// does.
const (
	AnnotationMetalLBIPs         = "metallb.io/loadBalancerIPs"
	AnnotationMetalLBIPsLegacy   = "metallb.universe.tf/loadBalancerIPs"
	AnnotationMetalLBPool        = "metallb.io/address-pool"
	AnnotationMetalLBPoolLegacy  = "metallb.universe.tf/address-pool"
	AnnotationCiliumIPs          = "lbipam.cilium.io/ips"
	AnnotationCalicoIPs          = "projectcalico.org/loadBalancerIPs"
	AnnotationCalicoPools        = "projectcalico.org/ipv4pools"
	AnnotationKubeVIPIPs         = "kube-vip.io/loadbalancerIPs"
	AnnotationAWSPrivateIPv4     = "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses"
	AnnotationAzureLoadBalancer4 = "service.beta.kubernetes.io/azure-load-balancer-ipv4"
)

// OtherRequestAnnotations are the annotations above, in the order they are
// read.
var OtherRequestAnnotations = []string{
	AnnotationMetalLBIPs, AnnotationMetalLBIPsLegacy, AnnotationMetalLBPool, AnnotationMetalLBPoolLegacy,
	AnnotationCiliumIPs, AnnotationCalicoIPs, AnnotationCalicoPools, AnnotationKubeVIPIPs,
	AnnotationAWSPrivateIPv4, AnnotationAzureLoadBalancer4,
}

// The external-dns annotations a Service asks for a name with, under the
// prefix of external-dns v0.22 and later or of the releases before it.
const (
	ExternalDNSPrefix       = "external-dns.kubernetes.io/"
	ExternalDNSPrefixLegacy = "external-dns.alpha.kubernetes.io/"
)

// GatewayLabel reports whether label key may carry a Gateway's namespace (a
// Gateway controller's, such as Envoy Gateway's
// gateway.envoyproxy.io/owning-gateway-namespace): the labels a Record
// keeps. The pool file's gatewayNamespaceLabel must contain "gateway" for
// the sweeper to see it.
func GatewayLabel(key string) bool { return strings.Contains(key, "gateway") }

// RequestAnnotation reports whether annotation key is one of the other
// implementations' requests (OtherRequestAnnotations): a Record keeps them.
func RequestAnnotation(key string) bool { return slices.Contains(OtherRequestAnnotations, key) }
