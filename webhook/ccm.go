package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// checkCCMContract refuses what the CCM would refuse later, with the IP
// already booked: spec.loadBalancerIP on a private Load Balancer, and a
// pn-ids naming a Private Network that does not exist in the region.
func (m *ServiceMutator) checkCCMContract(ctx context.Context, cfg *ipam.Config, svc *corev1.Service, ask request.Ask) error {
	if svc.Annotations[ccm.AnnotationPrivate] == "true" && svc.Spec.LoadBalancerIP != "" {
		return fmt.Errorf("spec.loadBalancerIP %s: the CCM refuses spec.loadBalancerIP on a private Load Balancer (%s: \"true\"); remove it and set annotation %s: %q to reserve that address", svc.Spec.LoadBalancerIP, ccm.AnnotationPrivate, request.AnnotationAddress, svc.Spec.LoadBalancerIP)
	}
	known := map[string]bool{cfg.ClusterPrivateNetworkID: true}
	for _, p := range cfg.Pools {
		known[p.PrivateNetworkID] = true
	}
	for _, id := range ask.PNIDs {
		if known[ccm.PrivateNetworkID(id)] {
			continue
		}
		exists, err := m.Allocator.PrivateNetworkExists(ctx, ccm.PrivateNetworkID(id))
		if err != nil {
			return err
		}
		if !exists {
			return &request.AnnotationError{Annotation: ccm.AnnotationPNIDs, Value: strings.Join(ask.PNIDs, ","), Problem: fmt.Sprintf("Private Network %s does not exist in region %s, so the CCM could not attach the Load Balancer to it; fix or remove it", ccm.PrivateNetworkID(id), cfg.Region)}
		}
	}
	return nil
}

// maxPrivateNetworks is how many Private Networks one Scaleway Load Balancer
// attaches at most.
const maxPrivateNetworks = 8

// checkNetworkLimit refuses a pn-ids of more networks than a Load Balancer
// attaches: the CCM would attach it to some and fail on the rest, with the
// IPs already booked. pns is the pn-ids to be written; from says where its
// networks come from, for the user.
func checkNetworkLimit(pns []string, from string) error {
	if len(pns) <= maxPrivateNetworks {
		return nil
	}
	return fmt.Errorf("%s would list %d Private Networks (%s: %s), and a Scaleway Load Balancer attaches at most %d, so the CCM could not attach it to them all; list fewer networks in %s, or ask for fewer pools",
		ccm.AnnotationPNIDs, len(pns), from, strings.Join(pns, ","), maxPrivateNetworks, ccm.AnnotationPNIDs)
}

// pnOrigin says where the first networks of pn-ids come from.
func pnOrigin(user []string) string {
	if len(user) > 0 {
		return "the networks " + ccm.AnnotationPNIDs + " lists"
	}
	return "the nodes' network"
}

// ccmWarnings say what the CCM will do besides attaching the reserved IPs.
func ccmWarnings(cfg *ipam.Config, svc *corev1.Service, ask request.Ask) []string {
	var out []string
	if len(ask.PNIDs) > 0 && !slices.ContainsFunc(ask.PNIDs, func(id string) bool { return ccm.PrivateNetworkID(id) == cfg.ClusterPrivateNetworkID }) {
		out = append(out, fmt.Sprintf("scw-lb-ipam: %s lists Private Networks without the nodes' network %s: the CCM attaches the Load Balancer to the listed networks only, and the Load Balancer reaches its backends through the nodes' network; add %s", ccm.AnnotationPNIDs, cfg.ClusterPrivateNetworkID, cfg.ClusterPrivateNetworkID))
	}
	if svc.Annotations[ccm.AnnotationPrivate] != "true" {
		out = append(out, fmt.Sprintf("scw-lb-ipam: the Load Balancer also gets a public IP, as %s is not \"true\"; set it for a private-only Load Balancer", ccm.AnnotationPrivate))
	}
	return out
}

// proxyProtocolWarning warns when PROXY protocol covers only some ports. The
// reserved IP is published in the Service's status, so kube-proxy sends
// in-cluster clients straight to the backends, bypassing the LB: on the
// ports that expect a PROXY header those connections break, and on the others
// they lose nothing. Mixed Services are where that surprises people.
func proxyProtocolWarning(svc *corev1.Service) string {
	key, v, missing, ok := ccm.ProxyProtocolGap(svc)
	if !ok {
		return ""
	}
	return fmt.Sprintf("scw-lb-ipam: %s enables PROXY protocol on ports %s but not on %s; in-cluster clients reach the backends directly, bypassing the Load Balancer, so they send no PROXY header on any port: enable it on all ports or on none", key, v, strings.Join(missing, ","))
}

// dhcpNote tells, in the reservation's Event, that a Load Balancer attached
// to the nodes' network besides the pools' gets a DHCP address there too,
// and which address is the reserved one.
func dhcpNote(clusterPN string, written map[string]string) string {
	pns := strings.Split(written[ccm.AnnotationPNIDs], ",")
	ids := strings.Split(written[ccm.AnnotationPrivateIPIDs], ",")
	if !slices.ContainsFunc(pns, func(id string) bool { return ccm.PrivateNetworkID(id) == clusterPN }) || len(pns) <= len(ids) {
		return ""
	}
	return fmt.Sprintf("; the Load Balancer also gets a DHCP address on the nodes' Private Network %s, to reach the backends: the reserved address is the one in %s (%s)", clusterPN, request.AnnotationAddresses, written[request.AnnotationAddresses])
}
