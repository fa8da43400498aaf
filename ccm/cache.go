package ccm

import (
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotation prefixes of scw-lb-ipam and of the Scaleway CCM: every
// annotation this process reads on a Service starts with one of them.
const (
	annotationPrefix    = "scw-lb-ipam.io/"
	ccmAnnotationPrefix = "service.beta.kubernetes.io/scw-loadbalancer-"
)

// TrimService is the Service cache's transform (a client-go TransformFunc,
// run on every Service before the informer stores it or hands it to an
// event handler): it keeps of a Service only what this process reads from
// the cache. The cache holds every Service of the cluster for the life of
// the process, and served Services carry much that nothing here reads: the
// spec's ports and selectors, the status, managedFields, and annotations
// such as kubectl's last-applied-configuration, a copy of the whole
// manifest.
//
// The readers of cached Services and what they read:
//   - the index by referenced IPAM IDs (LiveIDs, behind References and the
//     allocator's "who references this ID"): spec.type, the deletion
//     timestamp and the private-ip-ids annotation, and the key of the
//     Services it returns;
//   - the webhook's informer handler that hands the allocator every
//     referenced ID (Remember): the key and private-ip-ids;
//   - the sweeper's trigger, its cycle and the cycle's report of unreserved
//     Services (request.Unreserved): spec.type, the deletion
//     timestamp, the key, the UID, and the annotations of scw-lb-ipam and the
//     CCM that make a request (pool, address, IPAM IDs, private-ip-ids,
//     pn-ids, addresses, allow-ip-change, externally-managed);
//   - the Events the sweeper records on a Service: its reference (key, UID
//     and resourceVersion; the kind comes from the scheme);
//   - the webhook's Events held until the Service they describe exists
//     (webhook.heldEvents): the same reference, the deletion and creation
//     timestamps;
//   - the sweeper's convergence monitor (Classify): the CCM's annotations
//     and the IPs of status.loadBalancer.ingress.
//
// So it keeps the namespace, name, UID, resourceVersion, creation and
// deletion timestamps, spec.type, spec.loadBalancerClass, the IPs of
// status.loadBalancer.ingress and every annotation of scw-lb-ipam or of the
// CCM (by prefix, so that an annotation read later needs no change here),
// and drops the rest. HasLoadBalancer, OnlyCCMChanges and
// request.ProxyProtocolGap read more (status, finalizers, ports), but only
// on the Services of an admission request, never on cached ones. A new reader of cached Services that needs more
// must add it here, and to the test that compares every reader's answers on
// a Service and on its trimmed copy.
//
// Annotation keys and namespaces repeat across Services: they are interned,
// held once whatever the number of Services. Objects other than Services
// pass through unchanged.
func TrimService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         intern(svc.Namespace),
			Name:              svc.Name,
			UID:               svc.UID,
			ResourceVersion:   svc.ResourceVersion,
			CreationTimestamp: svc.CreationTimestamp,
			DeletionTimestamp: svc.DeletionTimestamp,
			Annotations:       keptAnnotations(svc.Annotations),
		},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceType(intern(string(svc.Spec.Type))), LoadBalancerClass: svc.Spec.LoadBalancerClass},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingressIPs(svc.Status.LoadBalancer.Ingress)}},
	}, nil
}

// ingressIPs are the IPs of a status's ingress, nil when there are none.
func ingressIPs(in []corev1.LoadBalancerIngress) []corev1.LoadBalancerIngress {
	var out []corev1.LoadBalancerIngress
	for _, i := range in {
		if i.IP != "" {
			out = append(out, corev1.LoadBalancerIngress{IP: i.IP})
		}
	}
	return out
}

// keptAnnotations are the annotations of scw-lb-ipam and of the CCM in ann,
// nil when there are none.
func keptAnnotations(ann map[string]string) map[string]string {
	n := 0
	for k := range ann {
		if kept(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range ann {
		if kept(k) {
			out[intern(k)] = v
		}
	}
	return out
}

func kept(key string) bool {
	return strings.HasPrefix(key, annotationPrefix) || strings.HasPrefix(key, ccmAnnotationPrefix)
}

// intern returns the canonical copy of s: the strings every Service repeats
// are then held once.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}
