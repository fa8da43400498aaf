package ccm

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Live reports whether a Service holds its IPs: a LoadBalancer the CCM
// serves (no spec.loadBalancerClass: another controller's, which the CCM
// ignores) and not being deleted.
func Live(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && svc.DeletionTimestamp == nil
}

// ReferencedIDs are the IPAM IDs a Service hands to the CCM.
func ReferencedIDs(svc *corev1.Service) []string {
	v := svc.Annotations[AnnotationPrivateIPIDs]
	if v == "" {
		return nil
	}
	var out []string
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
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

// PrivateNetworkID strips the zone the CCM allows in front of an item of
// pn-ids ("fr-par-1/<id>").
func PrivateNetworkID(item string) string {
	if _, id, ok := strings.Cut(item, "/"); ok {
		return id
	}
	return item
}

// proxyProtocolAnnotations are the CCM's PROXY protocol annotations: "true",
// "*", or a list of ports.
var proxyProtocolAnnotations = []string{
	"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v1",
	"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2",
	"service.beta.kubernetes.io/scw-loadbalancer-send-proxy-v2",
}

// ProxyProtocolGap finds a PROXY protocol annotation that lists some of the
// Service's ports but not all: it returns the annotation, its value and the
// ports left out, or ok false when every such annotation covers all ports or
// none.
func ProxyProtocolGap(svc *corev1.Service) (annotation, value string, missing []string, ok bool) {
	for _, key := range proxyProtocolAnnotations {
		v := strings.TrimSpace(svc.Annotations[key])
		if v == "" || v == "false" || v == "true" || v == "*" {
			continue
		}
		covered := map[int32]bool{}
		for _, p := range strings.Split(v, ",") {
			if n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); err == nil {
				covered[int32(n)] = true
			}
		}
		var out []string
		for _, port := range svc.Spec.Ports {
			if !covered[port.Port] {
				out = append(out, strconv.Itoa(int(port.Port)))
			}
		}
		if len(out) > 0 && len(covered) > 0 {
			return key, v, out, true
		}
	}
	return "", "", nil, false
}

// LoadBalancerID is the ID of the Service's Load Balancer from
// AnnotationLoadBalancerID, which the CCM writes as "<zone>/<id>" (its
// getLoadBalancerID also reads "<region>/<id>"); a bare ID is read as is.
// Empty while the CCM has not made the Load Balancer.
func LoadBalancerID(svc *corev1.Service) string {
	v := strings.TrimSpace(svc.Annotations[AnnotationLoadBalancerID])
	if i := strings.LastIndexByte(v, '/'); i >= 0 {
		v = v[i+1:]
	}
	// The CCM lower-cases the annotation before it splits it.
	return strings.ToLower(v)
}
