package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// CCMWrite reports an UPDATE that changes only what the CCM and the
// cloud-provider service controller write on a Service: the cleanup
// finalizer, the scw-loadbalancer-id annotation and the status. Such writes
// pass untouched with no IPAM call: judging them (say, allocating for a
// Service admitted unreserved when the CCM adds its finalizer) would race
// the CCM creating the Load Balancer, or leave it stuck.
func CCMWrite(old, svc *corev1.Service) bool {
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

// checkCCMContract refuses what the CCM would refuse later, with the IP
// already booked: spec.loadBalancerIP on a private Load Balancer, and a
// pn-ids naming a Private Network that does not exist in the region.
func (m *ServiceMutator) checkCCMContract(ctx context.Context, cfg *ipam.Config, svc *corev1.Service, ask request) error {
	if svc.Annotations[AnnotationPrivate] == "true" && svc.Spec.LoadBalancerIP != "" {
		return fmt.Errorf("spec.loadBalancerIP %s: the CCM refuses spec.loadBalancerIP on a private Load Balancer (%s: \"true\"); remove it and set annotation %s: %q to reserve that address", svc.Spec.LoadBalancerIP, AnnotationPrivate, AnnotationAddress, svc.Spec.LoadBalancerIP)
	}
	known := map[string]bool{cfg.ClusterPrivateNetworkID: true}
	for _, p := range cfg.Pools {
		known[p.PrivateNetworkID] = true
	}
	for _, id := range ask.PNIDs {
		if known[pnIDOf(id)] {
			continue
		}
		exists, err := m.Allocator.PrivateNetworkExists(ctx, pnIDOf(id))
		if err != nil {
			return err
		}
		if !exists {
			return &annotationError{AnnotationPNIDs, strings.Join(ask.PNIDs, ","), fmt.Sprintf("Private Network %s does not exist in region %s, so the CCM could not attach the Load Balancer to it; fix or remove it", pnIDOf(id), cfg.Region), nil}
		}
	}
	return nil
}

// ccmWarnings say what the CCM will do besides attaching the reserved IPs.
func ccmWarnings(cfg *ipam.Config, svc *corev1.Service, ask request) []string {
	var out []string
	if len(ask.PNIDs) > 0 && !slices.ContainsFunc(ask.PNIDs, func(id string) bool { return pnIDOf(id) == cfg.ClusterPrivateNetworkID }) {
		out = append(out, fmt.Sprintf("scw-lb-ipam: %s lists Private Networks without the nodes' network %s: the CCM attaches the Load Balancer to the listed networks only, and the Load Balancer reaches its backends through the nodes' network; add %s", AnnotationPNIDs, cfg.ClusterPrivateNetworkID, cfg.ClusterPrivateNetworkID))
	}
	if svc.Annotations[AnnotationPrivate] != "true" {
		out = append(out, fmt.Sprintf("scw-lb-ipam: the Load Balancer also gets a public IP, as %s is not \"true\"; set it for a private-only Load Balancer", AnnotationPrivate))
	}
	return out
}

// dhcpNote tells, in the reservation's Event, that a Load Balancer attached
// to the nodes' network besides the pools' gets a DHCP address there too,
// and which address is the reserved one.
func dhcpNote(clusterPN string, written map[string]string) string {
	pns := strings.Split(written[AnnotationPNIDs], ",")
	ids := strings.Split(written[AnnotationPrivateIPIDs], ",")
	if !slices.ContainsFunc(pns, func(id string) bool { return pnIDOf(id) == clusterPN }) || len(pns) <= len(ids) {
		return ""
	}
	return fmt.Sprintf("; the Load Balancer also gets a DHCP address on the nodes' Private Network %s, to reach the backends: the reserved address is the one in %s (%s)", clusterPN, AnnotationAddresses, written[AnnotationAddresses])
}
