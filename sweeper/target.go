package sweeper

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// Why a reserved IP is not applied: the reason label of
// scw_lb_ipam_services_not_converged, and what status shows.
const (
	// ReasonNotAttached: the IP is attached to nothing while the Service
	// has its Load Balancer. Likely the CCM ignored private-ip-ids: it is
	// older than v0.36.0, the first that reads it.
	ReasonNotAttached = "not_attached"
	// ReasonAttachedElsewhere: the IP is attached to another resource than
	// the Service's Load Balancer, e.g. its previous Load Balancer that is
	// still being deleted.
	ReasonAttachedElsewhere = "attached_elsewhere"
	// ReasonGone: the ID no longer exists in IPAM (released or deleted out
	// of band, from the console or Terraform).
	ReasonGone = "gone_from_ipam"
	// ReasonNotInStatus: the IP is attached to the Service's Load Balancer
	// but its address is not in status.loadBalancer.ingress.
	ReasonNotInStatus = "not_in_status"
)

// reasons are every reason label value, in the order they are reported.
var reasons = []string{ReasonNotAttached, ReasonAttachedElsewhere, ReasonGone, ReasonNotInStatus}

// Reasons returns every reason label value, in the order they are reported.
func Reasons() []string { return slices.Clone(reasons) }

// What status shows for an address that is not reported by a reason.
const (
	// ConvergenceApplied: the IP is attached to the Service's Load Balancer
	// (and in its status where the CCM writes it there).
	ConvergenceApplied = "applied"
	// ConvergencePending: the Service has no Load Balancer yet.
	ConvergencePending = "pending"
)

// Target is what Classify and the Event read of a live Service.
type Target struct {
	// LoadBalancerID is the Service's Load Balancer, "" before the CCM made it.
	LoadBalancerID string
	// Addresses are the reserved addresses as admitted, in the order of
	// the IDs; none when the Service was not admitted with a reservation.
	Addresses []string
	// BringYourOwn are the IDs of scw-lb-ipam.io/ipam-ids: never in our
	// listing.
	BringYourOwn []string
	// Ingress are the status's addresses, kept only where the CCM writes
	// the private ones there (ccm.StatusListsPrivateIPs).
	Ingress []netip.Addr
	// StatusListsPrivateIPs: the reserved IPv4 addresses are expected in
	// the status.
	StatusListsPrivateIPs bool
	// DNS: external-dns publishes the Service's name at Addresses (the
	// target the webhook wrote), attached or not.
	DNS bool
}

// TargetOf reads a Service's Target from its Record.
func TargetOf(svc *servicecache.Record) Target {
	t := Target{LoadBalancerID: svc.LoadBalancerID(), StatusListsPrivateIPs: ccm.StatusListsPrivateIPs(svc.Annotation), DNS: svc.DNSReserved()}
	t.Addresses = ccm.Items(svc.Annotation(request.AnnotationAddresses))
	t.BringYourOwn = ccm.Items(svc.Annotation(request.AnnotationIPAMIDs))
	if t.StatusListsPrivateIPs {
		for _, in := range svc.Ingress {
			if a, err := netip.ParseAddr(in); err == nil {
				t.Ingress = append(t.Ingress, a)
			}
		}
	}
	return t
}

// Classify says whether one IPAM ID a live Service references is applied:
// ConvergenceApplied, ConvergencePending, one of the reasons, or "" when
// nothing can be told. ip is the ID as listed, nil when the listing does
// not hold it; bringYourOwn is true for an ID that is not one of our
// reservations (its absence from our listing proves nothing). The sweeper
// and status both judge with it; neither applies a grace here.
func Classify(t Target, ip *scaleway.IP, bringYourOwn bool) string {
	if ip == nil {
		if bringYourOwn || len(t.Addresses) == 0 {
			// Not admitted with a reservation by scw-lb-ipam: the ID was
			// never in our listing.
			return ""
		}
		return ReasonGone
	}
	switch {
	case t.LoadBalancerID == "":
		return ConvergencePending
	case ip.Resource == nil:
		return ReasonNotAttached
	case ip.Resource.Type != scaleway.ResourceLoadBalancer || !strings.EqualFold(ip.Resource.ID, t.LoadBalancerID):
		return ReasonAttachedElsewhere
	case t.StatusListsPrivateIPs && ip.Address.Is4() && !slices.Contains(t.Ingress, ip.Address):
		return ReasonNotInStatus
	}
	return ConvergenceApplied
}
