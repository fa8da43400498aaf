package ccm

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
