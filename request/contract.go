package request

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// The CCM's contract, as an admission must keep it: every rule the CCM
// would otherwise break on later, with the IPs already booked, is here,
// and so is how the CCM reads pn-ids.

// maxPrivateNetworks is how many Private Networks one Scaleway Load Balancer
// attaches at most.
const maxPrivateNetworks = 8

// pnIDsSpacing refuses spaces around pn-ids items: the CCM splits the
// annotation on commas only and attaches each item as it is.
func pnIDsSpacing(ann map[string]string) error {
	for _, item := range strings.Split(ann[ccm.AnnotationPNIDs], ",") {
		if t := strings.TrimSpace(item); t != item && t != "" {
			return &AnnotationError{ccm.AnnotationPNIDs, ann[ccm.AnnotationPNIDs], fmt.Sprintf("item %q has spaces around it: the CCM splits this annotation on commas only and attaches each item as it is, so the Private Network would fail to attach; write the IDs comma-separated without spaces", truncate(item)), nil}
		}
	}
	return nil
}

// pnItem checks one pn-ids item: a Private Network ID as the CCM attaches
// it, never a zonal one.
func pnItem(s string) error {
	if canonicalUUID(s) {
		return nil
	}
	if _, id, zonal := strings.Cut(s, "/"); zonal && canonicalUUID(id) {
		return fmt.Errorf("%q names a zone: the CCM splits %s on commas and attaches each item as a Private Network ID, so a zonal item fails to attach; write the plain ID %s", truncate(s), ccm.AnnotationPNIDs, id)
	}
	return fmt.Errorf("%q is not a Private Network ID in canonical form (36 lower-case characters, such as 8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f)", truncate(s))
}

// externallyManaged refuses a request of an externally managed Load
// Balancer. The CCM applies private-ip-ids to the shared Load Balancer: two
// Services with different IDs would make it flap. A default pool never
// applies; a private-ip-ids the user wrote is theirs and the CCM's business.
func externallyManaged(r Ask) error {
	for _, a := range []struct{ key, value string }{
		{AnnotationPool, strings.Join(r.Pools, ",")}, {AnnotationAddress, JoinAddrs(r.Addresses)}, {AnnotationIPAMIDs, strings.Join(r.IDs, ",")},
	} {
		if a.value != "" {
			return &AnnotationError{a.key, a.value, fmt.Sprintf("the Service uses an externally managed Load Balancer (%s: \"true\"), which several Services may share: its Private Network attachment is not this Service's to change; reserve the IP for that Load Balancer outside Kubernetes and remove %s", ccm.AnnotationExternallyManaged, a.key), nil}
		}
	}
	return nil
}

// sharedNetwork finds the first two items on the same Private Network: a
// Load Balancer takes one IP per Private Network. It is the one place that
// rule is checked, on the pools of a plan before booking (check), or on
// the reservations of IDs once validated (CheckReserved), never both.
func sharedNetwork(pns []string) (first, second int, shared bool) {
	for j, pn := range pns {
		if i := slices.Index(pns[:j], pn); i >= 0 {
			return i, j, true
		}
	}
	return 0, 0, false
}

// CheckBeforeBooking refuses what the CCM would refuse later, with the IP
// already booked, beyond what the plan holds (NewPlan): spec.loadBalancerIP
// on a private Load Balancer, and a pn-ids naming a Private Network that
// does not exist in the region (exists asks Scaleway about a network the
// pool file does not name).
func CheckBeforeBooking(ctx context.Context, cfg *ipam.Config, svc *corev1.Service, ask Ask, exists func(context.Context, string) (bool, error)) error {
	if err := CheckLoadBalancerIP(svc); err != nil {
		return err
	}
	known := map[string]bool{cfg.ClusterPrivateNetworkID: true}
	for _, p := range cfg.Pools {
		known[p.PrivateNetworkID] = true
	}
	for _, id := range ask.PNIDs {
		if known[PrivateNetworkID(id)] {
			continue
		}
		ok, err := exists(ctx, PrivateNetworkID(id))
		if err != nil {
			return err
		}
		if !ok {
			return &AnnotationError{ccm.AnnotationPNIDs, strings.Join(ask.PNIDs, ","), fmt.Sprintf("Private Network %s does not exist in region %s, so the CCM could not attach the Load Balancer to it; fix or remove it", PrivateNetworkID(id), cfg.Region), nil}
		}
	}
	return nil
}

// CheckLoadBalancerIP refuses spec.loadBalancerIP on a private Load
// Balancer, which the CCM refuses on every sync ("can only handle static
// IPs for public load balancers"): no later change would reach the Load
// Balancer. It holds at CREATE (CheckBeforeBooking) and on every UPDATE
// that keeps the reservations. With translation on, the field was read as
// an address and cleared before this is asked.
func CheckLoadBalancerIP(svc *corev1.Service) error {
	if !ccm.Private(ccm.Of(svc.Annotations)) || svc.Spec.LoadBalancerIP == "" {
		return nil
	}
	return fmt.Errorf("spec.loadBalancerIP %s: the CCM refuses spec.loadBalancerIP on a private Load Balancer (%s: \"true\"); remove it and set annotation %s: %q to reserve that address", svc.Spec.LoadBalancerIP, ccm.AnnotationPrivate, AnnotationAddress, svc.Spec.LoadBalancerIP)
}

// CheckReserved holds the contract on what was reserved for p: the
// validated IDs one per Private Network, and a pn-ids the Load Balancer can
// attach once brought-your-own IDs name their networks.
func CheckReserved(cfg *ipam.Config, ask Ask, p *Plan, rs []*ipam.Grant) error {
	pns := ReservationPNs(rs)
	if len(p.IDs) > 0 {
		if i, j, shared := sharedNetwork(pns); shared {
			return fmt.Errorf("IPAM IDs %s and %s are both on Private Network %s, and a Load Balancer takes one IP per Private Network; keep one", rs[i].ID, rs[j].ID, pns[j])
		}
	}
	return CheckNetworkLimit(PNList(ask.PNIDs, []string{cfg.ClusterPrivateNetworkID}, pns), PNOrigin(ask.PNIDs)+", then those of the reserved IPs")
}

// CheckNetworkLimit refuses a pn-ids of more networks than a Load Balancer
// attaches: the CCM would attach it to some and fail on the rest, with the
// IPs already booked. pns is the pn-ids to be written; from says where its
// networks come from, for the user.
func CheckNetworkLimit(pns []string, from string) error {
	if len(pns) <= maxPrivateNetworks {
		return nil
	}
	return fmt.Errorf("%s would list %d Private Networks (%s: %s), and a Scaleway Load Balancer attaches at most %d, so the CCM could not attach it to them all; list fewer networks in %s, or ask for fewer pools",
		ccm.AnnotationPNIDs, len(pns), from, strings.Join(pns, ","), maxPrivateNetworks, ccm.AnnotationPNIDs)
}

// PNOrigin says where the first networks of pn-ids come from.
func PNOrigin(user []string) string {
	if len(user) > 0 {
		return "the networks " + ccm.AnnotationPNIDs + " lists"
	}
	return "the nodes' network"
}

// UnionPNs is the pn-ids annotation a CREATE writes: what the user set, or
// the cluster's Private Network, then every reservation's network, without
// duplicates. The CCM detaches the LB from networks it is not told about.
func UnionPNs(user []string, clusterPN string, rs []*ipam.Grant) string {
	return strings.Join(PNList(user, []string{clusterPN}, ReservationPNs(rs)), ",")
}

// PNList is pn-ids, for a CREATE and an UPDATE alike: user's items, or
// fallback where the user set none (a CREATE's is the nodes' network, an
// UPDATE's what an earlier admission wrote), then each of added that no
// item names yet.
func PNList(user, fallback, added []string) []string {
	out := slices.Clone(user)
	if len(out) == 0 {
		out = slices.Clone(fallback)
	}
	for _, id := range added {
		if !slices.ContainsFunc(out, func(s string) bool { return PrivateNetworkID(s) == PrivateNetworkID(id) }) {
			out = append(out, id)
		}
	}
	return out
}

// ReservationPNs are the Private Networks of the reservations, in order.
func ReservationPNs(rs []*ipam.Grant) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.PrivateNetworkID
	}
	return out
}

// Warnings say what the CCM will do besides attaching the reserved IPs:
// leave out the nodes' network, give a public IP too, or break in-cluster
// clients on the ports without PROXY protocol.
func Warnings(cfg *ipam.Config, svc *corev1.Service, ask Ask) []string {
	var out []string
	if len(ask.PNIDs) > 0 && !slices.ContainsFunc(ask.PNIDs, func(id string) bool { return PrivateNetworkID(id) == cfg.ClusterPrivateNetworkID }) {
		out = append(out, fmt.Sprintf("scw-lb-ipam: %s lists Private Networks without the nodes' network %s: the CCM attaches the Load Balancer to the listed networks only, and the Load Balancer reaches its backends through the nodes' network; add %s", ccm.AnnotationPNIDs, cfg.ClusterPrivateNetworkID, cfg.ClusterPrivateNetworkID))
	}
	if !ccm.Private(ccm.Of(svc.Annotations)) {
		out = append(out, fmt.Sprintf("scw-lb-ipam: the Load Balancer also gets a public IP, as %s is not \"true\"; set it for a private-only Load Balancer", ccm.AnnotationPrivate))
	}
	// PROXY protocol on some ports only. The reserved IP is published in the
	// Service's status, so kube-proxy sends in-cluster clients straight to
	// the backends, bypassing the LB: on the ports that expect a PROXY
	// header those connections break, and on the others they lose nothing.
	// Mixed Services are where that surprises people.
	if key, v, missing, ok := ProxyProtocolGap(svc); ok {
		out = append(out, fmt.Sprintf("scw-lb-ipam: %s enables PROXY protocol on ports %s but not on %s; in-cluster clients reach the backends directly, bypassing the Load Balancer, so they send no PROXY header on any port: enable it on all ports or on none", key, v, strings.Join(missing, ",")))
	}
	return out
}

// Writes are what an admission that reserved writes and tells.
type Writes struct {
	// Set are the CCM's annotations and ours, and external-dns's target
	// (spec.loadBalancerIP is never written: the CCM reads the IDs).
	Set map[string]string
	// Remove are annotations an earlier admission wrote that no longer
	// hold: a DNS target naming addresses the status will not list.
	Remove []string
	// DHCPNote ends the reservations' Events (DHCPNote).
	DHCPNote string
	// Warnings say what the CCM will do besides (Warnings).
	Warnings []string
}

// Written is what an admission that reserved rs for svc writes and tells.
func Written(cfg *ipam.Config, svc *corev1.Service, ask Ask, rs []*ipam.Grant) Writes {
	ids := make([]string, len(rs))
	addrs := make([]string, len(rs))
	for i, r := range rs {
		ids[i], addrs[i] = r.ID, r.Address.String()
	}
	w := Writes{Set: map[string]string{
		ccm.AnnotationPrivateIPIDs: strings.Join(ids, ","),
		ccm.AnnotationPNIDs:        UnionPNs(ask.PNIDs, cfg.ClusterPrivateNetworkID, rs),
		AnnotationAddresses:        strings.Join(addrs, ","),
	}}
	if t, ok := DNSTarget(cfg, svc.Annotations, JoinAddrs(ask.Recorded), w.Set[AnnotationAddresses]); ok {
		w.apply(t)
	}
	w.DHCPNote, w.Warnings = DHCPNote(cfg.ClusterPrivateNetworkID, w.Set), Warnings(cfg, svc, ask)
	return w
}

// apply adds a target edit to the writes.
func (w *Writes) apply(t TargetEdit) {
	if t.Value == "" {
		w.Remove = append(w.Remove, t.Key)
		return
	}
	w.Set[t.Key] = t.Value
}

// DHCPNote tells, in the reservation's Event, that a Load Balancer attached
// to the nodes' network besides the pools' gets a DHCP address there too,
// and which address is the reserved one; written are the annotations the
// admission writes.
func DHCPNote(clusterPN string, written map[string]string) string {
	pns := ccm.Items(written[ccm.AnnotationPNIDs])
	ids := ccm.Items(written[ccm.AnnotationPrivateIPIDs])
	if !slices.ContainsFunc(pns, func(id string) bool { return PrivateNetworkID(id) == clusterPN }) || len(pns) <= len(ids) {
		return ""
	}
	return fmt.Sprintf("; the Load Balancer also gets a DHCP address on the nodes' Private Network %s, to reach the backends: the reserved address is the one in %s (%s)", clusterPN, AnnotationAddresses, written[AnnotationAddresses])
}

// PrivateNetworkID is the ID of a pn-ids item, a zone in front of it
// ("fr-par-1/<id>") stripped, for comparing items: the CCM attaches each
// item as it is, so a zonal one fails there and pnItem refuses it at
// admission, but a Service admitted before may still carry one.
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
		for _, p := range ccm.Items(v) {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
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
