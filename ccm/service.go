package ccm

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Served reports whether the CCM serves the Service: a LoadBalancer without
// spec.loadBalancerClass (another load-balancer controller's, such as
// MetalLB, Cilium or kube-vip, which the CCM ignores, and so does a
// reservation). The webhook, the sweeper and the Record all ask it here.
func Served(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// Live reports whether a Service holds its IPs: served by the CCM and not
// being deleted.
func Live(svc *corev1.Service) bool { return Served(svc) && svc.DeletionTimestamp == nil }

// ReferencedIDs are the IPAM IDs a Service hands to the CCM.
func ReferencedIDs(svc *corev1.Service) []string {
	return Items(svc.Annotations[AnnotationPrivateIPIDs])
}

// Items are the items of a comma list an admission or the CCM wrote on a
// Service: each trimmed, empty ones dropped; nil when it has none. It is
// the one reading of such lists. What a user writes is checked stricter,
// by package request: the CCM splits its own lists on commas only.
func Items(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// HasLoadBalancer reports whether the CCM already made a Load Balancer for
// the Service: an ingress in its status, the CCM's LB ID annotation, or the
// cleanup finalizer. Giving such a Service IDs would make the CCM re-attach
// its Private Network: a new address and an outage.
func HasLoadBalancer(svc *corev1.Service) bool {
	return len(svc.Status.LoadBalancer.Ingress) > 0 || svc.Annotations[AnnotationLoadBalancerID] != "" ||
		slices.Contains(svc.Finalizers, FinalizerLoadBalancerCleanup)
}

// OnlyCCMChanges reports an UPDATE that changes only what the CCM and the
// cloud-provider service controller write on a Service: the cleanup
// finalizer, the scw-loadbalancer-id annotation and the status.
func OnlyCCMChanges(old, svc *corev1.Service) bool {
	a, b := withoutCCMFields(old), withoutCCMFields(svc)
	if equality.Semantic.DeepEqual(a, b) {
		return !equality.Semantic.DeepEqual(withoutVersion(old), withoutVersion(svc))
	}
	return false
}

func withoutVersion(s *corev1.Service) *corev1.Service {
	c := s.DeepCopy()
	c.ResourceVersion, c.Generation, c.ManagedFields = "", 0, nil
	return c
}

func withoutCCMFields(s *corev1.Service) *corev1.Service {
	c := withoutVersion(s)
	c.Status = corev1.ServiceStatus{}
	c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == FinalizerLoadBalancerCleanup })
	if len(c.Finalizers) == 0 {
		c.Finalizers = nil
	}
	delete(c.Annotations, AnnotationLoadBalancerID)
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	return c
}

// LoadBalancerID is the ID of the Service's Load Balancer from
// AnnotationLoadBalancerID, which the CCM writes as "<zone>/<id>" (its
// getLoadBalancerID also reads "<region>/<id>"); a bare ID is read as is.
// Empty while the CCM has not made the Load Balancer.
func LoadBalancerID(svc *corev1.Service) string {
	return ParseLoadBalancerID(svc.Annotations[AnnotationLoadBalancerID])
}

// NamedFor reports whether a Load Balancer named name is the one the CCM
// made for the Service of UID uid: it names each SCW_CCM_PREFIX and the
// Service's UID (GetLoadBalancerName), and deletes with a Service only the
// Load Balancer so named (deleteLoadBalancer: "was renamed, not
// removing"). The prefix is the CCM's configuration, not ours, so only
// the UID at the end is compared: a Load Balancer named with another
// prefix (an SCW_CCM_PREFIX changed since) passes here while the CCM
// would not delete it.
func NamedFor(name string, uid types.UID) bool {
	return uid != "" && strings.HasSuffix(name, string(uid))
}

// ParseLoadBalancerID is the ID in a value of AnnotationLoadBalancerID.
func ParseLoadBalancerID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.LastIndexByte(v, '/'); i >= 0 {
		v = v[i+1:]
	}
	// The CCM lower-cases the annotation before it splits it.
	return strings.ToLower(v)
}
