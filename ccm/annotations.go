package ccm

import "strconv"

// The CCM's annotations that scw-lb-ipam reads or writes.
const (
	// AnnotationPrivateIPIDs is the CCM's: IPAM IDs of the LB's private IPs.
	AnnotationPrivateIPIDs = "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids"
	// AnnotationPNIDs is the CCM's: the Private Networks to attach the LB to.
	AnnotationPNIDs = "service.beta.kubernetes.io/scw-loadbalancer-pn-ids"
	// AnnotationPrivate is the CCM's: "true" makes the Load Balancer
	// private-only (no public IP).
	AnnotationPrivate = "service.beta.kubernetes.io/scw-loadbalancer-private"
	// AnnotationExternallyManaged is the CCM's: "true" means the Load
	// Balancer is made outside Kubernetes and may serve several Services.
	AnnotationExternallyManaged = "service.beta.kubernetes.io/scw-loadbalancer-externally-managed"
	// AnnotationUseHostname is the CCM's: "true" makes the status list
	// hostnames, not addresses.
	AnnotationUseHostname = "service.beta.kubernetes.io/scw-loadbalancer-use-hostname"
)

// The CCM's own marks on a Service whose Load Balancer exists.
const (
	// AnnotationLoadBalancerID is written by the CCM once it created the
	// Load Balancer ("<zone>/<lb-id>").
	AnnotationLoadBalancerID = "service.beta.kubernetes.io/scw-loadbalancer-id"
	// FinalizerLoadBalancerCleanup is added by the cloud-provider service
	// controller before it creates the Load Balancer and removed once the
	// Load Balancer is gone.
	FinalizerLoadBalancerCleanup = "service.kubernetes.io/load-balancer-cleanup"
)

// Flag reads one of the CCM's boolean annotations through annotation as
// the CCM reads it: strconv.ParseBool, so "True" and "1" are true, and an
// absent or unparsable value is false. Every reader of these annotations
// (the webhook, the sweeper, status) decides through here, so that none
// disagrees with the CCM on a spelling.
func Flag(annotation func(string) string, key string) bool {
	v, err := strconv.ParseBool(annotation(key))
	return err == nil && v
}

// Private reports whether the CCM makes the Service's Load Balancer
// private-only (AnnotationPrivate).
func Private(annotation func(string) string) bool { return Flag(annotation, AnnotationPrivate) }

// ExternallyManaged reports whether the Service's Load Balancer is made
// outside Kubernetes (AnnotationExternallyManaged).
func ExternallyManaged(annotation func(string) string) bool {
	return Flag(annotation, AnnotationExternallyManaged)
}

// StatusListsPrivateIPs reports whether the CCM writes the private IPv4
// addresses IPAM shows on the Load Balancer into the Service's
// status.loadBalancer.ingress, where external-dns and kube-proxy read them:
// only for a private-only Load Balancer without use-hostname
// (createPrivateServiceStatus). A public one lists its public IPs only
// (createPublicServiceStatus), and use-hostname lists a hostname. So a
// reserved address reaches the status, and a DNS target may name it, only
// where this holds.
func StatusListsPrivateIPs(annotation func(string) string) bool {
	return Private(annotation) && !Flag(annotation, AnnotationUseHostname)
}

// Of reads the annotations of a map, for Flag and the readers above.
func Of(ann map[string]string) func(string) string {
	return func(key string) string { return ann[key] }
}
