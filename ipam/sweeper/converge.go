package sweeper

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// DefaultConvergenceGrace is how long a Service may take to show its
// reserved IPs on its Load Balancer before it is reported: the CCM creates
// and attaches a Load Balancer in a minute or two.
const DefaultConvergenceGrace = 5 * time.Minute

// EventReasonIPNotApplied is recorded (Warning) on a Service whose reserved
// IPs are not on its Load Balancer past the convergence grace, once per
// cause.
const EventReasonIPNotApplied = "IPNotApplied"

// Why a reserved IP is not applied: the reason label of
// scw_lb_ipam_services_not_converged, and what status shows.
const (
	// ReasonNotAttached: the IP is attached to nothing while the Service
	// has its Load Balancer. The CCM ignored private-ip-ids: it is older
	// than v0.36.0, the first that reads it.
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

// Reasons are every reason label value, in the order they are reported.
var Reasons = []string{ReasonNotAttached, ReasonAttachedElsewhere, ReasonGone, ReasonNotInStatus}

// What status shows for an address that is not reported by a reason.
const (
	// ConvergenceApplied: the IP is attached to the Service's Load Balancer
	// (and in its status where the CCM writes it there).
	ConvergenceApplied = "applied"
	// ConvergencePending: the Service has no Load Balancer yet.
	ConvergencePending = "pending"
)

// annotationUseHostname is the CCM's: the status lists hostnames, not
// addresses.
const annotationUseHostname = "service.beta.kubernetes.io/scw-loadbalancer-use-hostname"

// LoadBalancerID is the ID of the Service's Load Balancer from the CCM's
// scw-loadbalancer-id, which the CCM writes as "<zone>/<id>" (its
// getLoadBalancerID also reads "<region>/<id>"); a bare ID is read as is.
// Empty while the CCM has not made the Load Balancer.
func LoadBalancerID(svc *corev1.Service) string {
	v := strings.TrimSpace(svc.Annotations[ccm.AnnotationLoadBalancerID])
	if i := strings.LastIndexByte(v, '/'); i >= 0 {
		v = v[i+1:]
	}
	// The CCM lower-cases the annotation before it splits it.
	return strings.ToLower(v)
}

// Classify says whether one IPAM ID a live Service references is applied:
// ConvergenceApplied, ConvergencePending, one of the reasons, or "" when
// nothing can be told. ip is the ID as listed, nil when the listing does
// not hold it; bringYourOwn is true for an ID that is not one of our
// reservations (its absence from our listing proves nothing). The sweeper
// and status both judge with it; neither applies a grace here.
func Classify(svc *corev1.Service, id string, ip *scaleway.IP, bringYourOwn bool) string {
	if ip == nil {
		if bringYourOwn || svc.Annotations[ccm.AnnotationAddresses] == "" {
			// Not admitted with a reservation by scw-lb-ipam: the ID was
			// never in our listing.
			return ""
		}
		return ReasonGone
	}
	lb := LoadBalancerID(svc)
	switch {
	case lb == "":
		return ConvergencePending
	case ip.Resource == nil:
		return ReasonNotAttached
	case ip.Resource.Type != scaleway.ResourceLoadBalancer || !strings.EqualFold(ip.Resource.ID, lb):
		return ReasonAttachedElsewhere
	case statusListsPrivateIPs(svc) && ip.Address.Is4() && !inStatus(svc, ip.Address):
		return ReasonNotInStatus
	}
	return ConvergenceApplied
}

// statusListsPrivateIPs: the CCM writes the private IPv4 addresses IPAM
// shows on the Load Balancer into the status of a private-only Load
// Balancer; a public one lists its public IPs, and use-hostname lists
// hostnames, so the reserved address cannot be expected there (nor an IPv6
// one anywhere).
func statusListsPrivateIPs(svc *corev1.Service) bool {
	return strings.EqualFold(svc.Annotations[ccm.AnnotationPrivate], "true") && !strings.EqualFold(svc.Annotations[annotationUseHostname], "true")
}

func inStatus(svc *corev1.Service, addr netip.Addr) bool {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && a == addr {
			return true
		}
	}
	return false
}

// finding is one referenced ID that is not applied.
type finding struct {
	id       string
	address  string
	reason   string
	resource *scaleway.Resource
}

// watched is a live Service that references IDs, trimmed to what the
// monitor reads, so that the cycle does not hold the listed Services
// through the listing of the reservations.
type watched struct {
	ref liveRef
	ids []string
	svc *corev1.Service
}

// watchedCopy copies what Classify and the Events read.
func watchedCopy(svc *corev1.Service) *corev1.Service {
	out := &corev1.Service{}
	out.Namespace, out.Name, out.UID, out.ResourceVersion = svc.Namespace, svc.Name, svc.UID, svc.ResourceVersion
	out.Annotations = map[string]string{}
	for _, k := range []string{ccm.AnnotationLoadBalancerID, ccm.AnnotationAddresses, ccm.AnnotationIPAMIDs, ccm.AnnotationPrivate, annotationUseHostname} {
		if v, ok := svc.Annotations[k]; ok {
			out.Annotations[k] = v
		}
	}
	out.Status.LoadBalancer.Ingress = slices.Clone(svc.Status.LoadBalancer.Ingress)
	return out
}

// notConverged is what the monitor remembers of a Service that is not
// converged: since when (the sweeper's clock, at the first cycle that saw
// it so) and the cause its last Event named.
type notConverged struct {
	since    time.Time
	reasons  []string
	reported string
}

// monitor judges every watched Service from the cycle's listing. claimed
// are the IDs bring-your-own claims name, nil when they could not be read:
// then an ID missing from the listing is not judged and a Service waiting
// on that keeps what the monitor knew of it.
func (s *Sweeper) monitor(ws []watched, listed map[string]*scaleway.IP, claimed map[string]bool, now time.Time, rep *Report) {
	rep.NotConverged = map[string]int{}
	for _, r := range Reasons {
		rep.NotConverged[r] = 0
	}
	seen := map[types.UID]bool{}
	for _, w := range ws {
		findings, known := judge(w, listed, claimed)
		uid := w.svc.UID
		st := s.notConverged[uid]
		if !known && st != nil {
			// Keep what was known rather than restart the grace.
			seen[uid] = true
			s.count(st, now, rep)
			continue
		}
		if len(findings) == 0 {
			continue
		}
		seen[uid] = true
		if st == nil {
			st = &notConverged{since: now}
			s.notConverged[uid] = st
		}
		st.reasons = reasonsOf(findings)
		if !s.count(st, now, rep) {
			continue
		}
		if cause := causeOf(findings); cause != st.reported {
			st.reported = cause
			s.event(w.ref.object(), corev1.EventTypeWarning, EventReasonIPNotApplied, "%s", note(w.svc, findings, now.Sub(st.since)))
		}
	}
	// Converged and deleted Services are forgotten: the memory is bounded
	// by the Services not converged now.
	for uid := range s.notConverged {
		if !seen[uid] {
			delete(s.notConverged, uid)
		}
	}
}

// count adds a Service past the grace to the report, once per reason.
func (s *Sweeper) count(st *notConverged, now time.Time, rep *Report) bool {
	if now.Sub(st.since) < s.o.ConvergenceGrace {
		return false
	}
	for _, r := range st.reasons {
		rep.NotConverged[r]++
	}
	return true
}

// judge classifies each ID of a watched Service; known is false when an ID
// could not be judged because the claims were not read.
func judge(w watched, listed map[string]*scaleway.IP, claimed map[string]bool) (out []finding, known bool) {
	known = true
	byo := map[string]bool{}
	for _, id := range strings.Split(w.svc.Annotations[ccm.AnnotationIPAMIDs], ",") {
		if id = strings.TrimSpace(id); id != "" {
			byo[id] = true
		}
	}
	addrs := strings.Split(w.svc.Annotations[ccm.AnnotationAddresses], ",")
	for i, id := range w.ids {
		ip := listed[id]
		if ip == nil && claimed == nil && !byo[id] {
			known = false
			continue
		}
		reason := Classify(w.svc, id, ip, byo[id] || claimed[id])
		if !slices.Contains(Reasons, reason) {
			continue
		}
		f := finding{id: id, reason: reason}
		switch {
		case ip != nil:
			f.address, f.resource = ip.Address.String(), ip.Resource
		case len(addrs) == len(w.ids):
			// The webhook writes the addresses in the order of the IDs.
			f.address = strings.TrimSpace(addrs[i])
		}
		out = append(out, f)
	}
	return out, known
}

func reasonsOf(fs []finding) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, f.reason) {
			out = append(out, f.reason)
		}
	}
	return out
}

// causeOf keys the Event: a new one is recorded only when it changes.
func causeOf(fs []finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.id + "=" + f.reason
		if f.resource != nil {
			parts[i] += "@" + f.resource.Type + "/" + f.resource.ID
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// note is the Event's text: each IP not applied, what it is attached to,
// the likely cause and the fix.
func note(svc *corev1.Service, fs []finding, late time.Duration) string {
	lb := LoadBalancerID(svc)
	var b strings.Builder
	fmt.Fprintf(&b, "%d reserved IP(s) of this Service not applied after %s:", len(fs), late.Round(time.Second))
	for _, f := range fs {
		addr := f.address
		if addr == "" {
			addr = "unknown address"
		}
		fmt.Fprintf(&b, " IPAM IP %s (%s) [%s]: ", f.id, addr, f.reason)
		switch f.reason {
		case ReasonNotAttached:
			fmt.Fprintf(&b, "attached to nothing, while the Load Balancer %s exists: the CCM ignored %s, which CCMs older than v0.36.0 do, and the Load Balancer has a DHCP address instead. Check the CCM's version (Kapsule: upgrade the cluster to a version whose CCM is v0.36.0 or later); once it reads the annotation it attaches the IP at its next sync of this Service.",
				lb, ccm.AnnotationPrivateIPIDs)
		case ReasonAttachedElsewhere:
			holder := f.resource.Type + " " + f.resource.ID
			if f.resource.Name != "" {
				holder += " (" + f.resource.Name + ")"
			}
			if f.resource.Type == scaleway.ResourceLoadBalancer {
				fmt.Fprintf(&b, "attached to %s, not to this Service's Load Balancer %s: likely its previous Load Balancer, still being deleted (`scw lb lb get %s` shows its status). Once that Load Balancer is deleted, the CCM attaches the IP at its next sync of this Service.",
					holder, lb, f.resource.ID)
			} else {
				fmt.Fprintf(&b, "attached to %s, not to this Service's Load Balancer %s: another resource took the address. Detach it from that resource; the CCM then attaches the IP at its next sync of this Service.",
					holder, lb)
			}
		case ReasonGone:
			fmt.Fprintf(&b, "no longer exists in IPAM: it was released or deleted out of band (console, Terraform), and the address may be handed to anything. To recover, set %s: \"true\" and remove %s from %s (scw-lb-ipam reserves a new address; the CCM re-attaches the Load Balancer, a brief outage), or delete and re-create the Service.",
				ccm.AnnotationAllowIPChange, f.id, ccm.AnnotationPrivateIPIDs)
		case ReasonNotInStatus:
			fmt.Fprintf(&b, "attached to this Service's Load Balancer %s, but %s is not in status.loadBalancer.ingress: the CCM has not finished syncing this Service; see its events (kubectl describe service).",
				lb, addr)
		}
	}
	return b.String()
}
