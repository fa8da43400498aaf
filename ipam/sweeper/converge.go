package sweeper

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
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

// noteLengthLimit is events.k8s.io/v1's limit on a note (NoteLengthLimit):
// a longer one is rejected, and the Event lost.
const noteLengthLimit = 1024

// Target is what Classify and the Event read of a live Service: small, so
// that the cycle does not hold every listed Service through the listing of
// the reservations.
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
	// the private ones there (see statusListsPrivateIPs).
	Ingress []netip.Addr
	// StatusListsPrivateIPs: the reserved IPv4 addresses are expected in
	// the status.
	StatusListsPrivateIPs bool
}

// TargetOf reads a Service's Target.
func TargetOf(svc *corev1.Service) Target {
	t := Target{LoadBalancerID: ccm.LoadBalancerID(svc), StatusListsPrivateIPs: statusListsPrivateIPs(svc)}
	if v := svc.Annotations[request.AnnotationAddresses]; v != "" {
		for _, a := range strings.Split(v, ",") {
			t.Addresses = append(t.Addresses, strings.TrimSpace(a))
		}
	}
	for _, id := range strings.Split(svc.Annotations[request.AnnotationIPAMIDs], ",") {
		if id = strings.TrimSpace(id); id != "" {
			t.BringYourOwn = append(t.BringYourOwn, id)
		}
	}
	if t.StatusListsPrivateIPs {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
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

// statusListsPrivateIPs: the CCM writes the private IPv4 addresses IPAM
// shows on the Load Balancer into the status of a private-only Load
// Balancer; a public one lists its public IPs, and use-hostname lists
// hostnames, so the reserved address cannot be expected there (nor an IPv6
// one anywhere).
func statusListsPrivateIPs(svc *corev1.Service) bool {
	return strings.EqualFold(svc.Annotations[ccm.AnnotationPrivate], "true") && !strings.EqualFold(svc.Annotations[ccm.AnnotationUseHostname], "true")
}

// finding is one referenced ID that is not applied.
type finding struct {
	id       string
	address  string
	reason   string
	resource *scaleway.Resource
}

// key names a finding in the monitor's memory and in the cause of an
// Event: the ID, the reason and, for attached_elsewhere, the holder (for
// the others it is nothing or the Service's own Load Balancer), as the
// note's line shows them (see parseNote).
func (f finding) key() string {
	k := f.id + "=" + f.reason
	if f.reason == ReasonAttachedElsewhere && f.resource != nil {
		k += "@" + f.resource.Type + "/" + f.resource.ID
	}
	return k
}

// watched is a live Service that references IDs, trimmed to what the
// monitor reads.
type watched struct {
	ref liveRef
	ids []string
	t   Target
}

// notConverged is what the monitor remembers of a Service that is not
// converged. The grace runs per finding (ID, reason and holder): a cause
// that changes, e.g. a stuck previous Load Balancer finally deleted and
// the IP attached to nothing while the CCM backs off, starts its own.
type notConverged struct {
	// since is when each current finding was first seen (the sweeper's
	// clock).
	since map[string]time.Time
	// reads are the GetIP confirmations of the IDs our listing misses,
	// past their grace: a tag rewritten out of band or a skipped page
	// hides an IP that exists.
	reads map[string]goneRead
	// due are the findings past their grace at the last judged cycle.
	due []finding
	// reported is the cause the last Event named.
	reported string
}

// goneRead is one GetIP of an ID the listing misses: f is the finding it
// gave (nil: the IP exists and is applied).
type goneRead struct {
	at time.Time
	f  *finding
}

// monitor judges every watched Service from the cycle's listing. claimed
// are the IDs bring-your-own claims name, nil when they could not be read:
// then an ID missing from the listing is not judged and a Service waiting
// on that keeps what the monitor knew of it.
func (s *Sweeper) monitor(ctx context.Context, ws []watched, listed map[string]*scaleway.IP, claimed map[string]bool, now time.Time, rep *Report) {
	rep.NotConverged = map[string]int{}
	for _, r := range reasons {
		rep.NotConverged[r] = 0
	}
	seen := map[types.UID]bool{}
	for _, w := range ws {
		findings, known := judge(w, listed, claimed)
		uid := w.ref.uid
		st := s.notConverged[uid]
		if !known && st != nil {
			// Keep what was known rather than restart the grace.
			seen[uid] = true
			countReasons(st.due, rep)
			continue
		}
		if len(findings) == 0 {
			continue
		}
		seen[uid] = true
		if st == nil {
			st = &notConverged{since: map[string]time.Time{}, reads: map[string]goneRead{}}
			s.notConverged[uid] = st
		}
		since := make(map[string]time.Time, len(findings))
		var due []finding
		for _, f := range findings {
			t, ok := st.since[f.key()]
			if !ok {
				t = now
			}
			since[f.key()] = t
			if now.Sub(t) >= s.o.ConvergenceGrace {
				due = append(due, f)
			}
		}
		st.since = since
		st.due = s.confirmGone(ctx, w, st, due, now)
		countReasons(st.due, rep)
		if len(st.due) == 0 {
			continue
		}
		if cause := causeOf(st.due); cause != st.reported {
			st.reported = cause
			s.event(w.ref.object(), corev1.EventTypeWarning, EventReasonIPNotApplied, "%s", note(w.t, st.due, now.Sub(earliest(st.since, st.due))))
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

// confirmGone reads each ID the listing misses once it is past its grace,
// before it is reported: the listing filters on
// our cluster tag, which Terraform or the console may have rewritten. An
// ID that exists is judged from the read. A failed read reports nothing
// for that ID this cycle. Only here does the monitor call Scaleway: a
// steady state with nothing gone costs nothing.
func (s *Sweeper) confirmGone(ctx context.Context, w watched, st *notConverged, due []finding, now time.Time) []finding {
	var out []finding
	kept := map[string]goneRead{}
	for _, f := range due {
		if f.reason != ReasonGone {
			out = append(out, f)
			continue
		}
		// Not found is final (IPAM does not reuse IDs); an IP found is read
		// again a grace later, as it may have changed since.
		r, ok := st.reads[f.id]
		if !ok || (r.f == nil || r.f.reason != ReasonGone) && now.Sub(r.at) >= s.o.ConvergenceGrace {
			ip, err := s.o.Cloud.GetIP(ctx, f.id)
			switch {
			case scaleway.Classify(err) == scaleway.KindNotFound:
				r = goneRead{at: now, f: &f}
			case err != nil:
				s.o.Log.V(1).Info("cannot confirm that an IP our listing misses is gone; not reported this cycle", "ipamID", f.id, "error", err.Error())
				continue
			default:
				r = goneRead{at: now}
				if reason := Classify(w.t, ip, false); slices.Contains(reasons, reason) {
					r.f = &finding{id: f.id, address: ip.Address.String(), reason: reason, resource: ip.Resource}
				}
			}
		}
		kept[f.id] = r
		if r.f != nil {
			out = append(out, *r.f)
		}
	}
	st.reads = kept
	return out
}

func countReasons(due []finding, rep *Report) {
	for _, r := range reasonsOf(due) {
		rep.NotConverged[r]++
	}
}

// earliest is when the oldest of fs was first seen; a finding read by
// confirmGone under another key counts from its ID's.
func earliest(since map[string]time.Time, fs []finding) time.Time {
	var out time.Time
	for _, f := range fs {
		t, ok := since[f.key()]
		if !ok {
			t, ok = since[f.id+"="+ReasonGone]
		}
		if ok && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// judge classifies each ID of a watched Service; known is false when an ID
// could not be judged because the claims were not read.
func judge(w watched, listed map[string]*scaleway.IP, claimed map[string]bool) (out []finding, known bool) {
	known = true
	for i, id := range w.ids {
		ip := listed[id]
		byo := slices.Contains(w.t.BringYourOwn, id)
		if ip == nil && claimed == nil && !byo {
			known = false
			continue
		}
		reason := Classify(w.t, ip, byo || claimed[id])
		if !slices.Contains(reasons, reason) {
			continue
		}
		f := finding{id: id, reason: reason}
		switch {
		case ip != nil:
			f.address, f.resource = ip.Address.String(), ip.Resource
		case len(w.t.Addresses) == len(w.ids):
			// The webhook writes the addresses in the order of the IDs.
			f.address = w.t.Addresses[i]
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
		parts[i] = f.key()
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// note is the Event's text: one line per IP not applied, naming what holds
// it, then one fix per distinct reason (a pointer to the runbook where they
// do not fit); cut to what events.k8s.io accepts. The lines come first so
// that parseNote reads the cause back.
func note(t Target, fs []finding, late time.Duration) string {
	header := fmt.Sprintf("%d reserved IP(s) of this Service not applied after %s:", len(fs), late.Round(time.Second))
	lb := t.LoadBalancerID
	var fix strings.Builder
	for _, r := range reasonsOf(fs) {
		fmt.Fprintf(&fix, "\n[%s] ", r)
		switch r {
		case ReasonNotAttached:
			fmt.Fprintf(&fix, "Load Balancer %s exists: likely the CCM ignored %s (older than v0.36.0; the LB has a DHCP address): upgrade it (Kapsule: the cluster). A newer CCM failing to attach (e.g. over 8 Private Networks) looks the same: look for SyncLoadBalancerFailed in `kubectl describe service`.", lb, ccm.AnnotationPrivateIPIDs)
		case ReasonAttachedElsewhere:
			fmt.Fprintf(&fix, "not on this Service's Load Balancer %s: likely its previous one, still being deleted (`scw lb lb get <id>`): wait. Stuck in to_delete over ~1h: open a Scaleway support ticket, or move to a new address with %s. Another resource: detach the IP from it.", lb, request.AnnotationAllowIPChange)
		case ReasonGone:
			fmt.Fprintf(&fix, "released or deleted out of band. Re-create the Service with %s set to the old address (booked anew if still free), or set %s: \"true\" and ask for another address. Removing the ID from %s does not help: it is put back.", request.AnnotationAddress, request.AnnotationAllowIPChange, ccm.AnnotationPrivateIPIDs)
		case ReasonNotInStatus:
			fix.WriteString("on the Load Balancer, not yet in status.loadBalancer.ingress: the CCM has not finished syncing; see `kubectl describe service`.")
		}
	}
	// Many IPs: the lines name them all, the runbook the fixes, and the
	// holders' names go first.
	const runbook = "\nFixes: the README's runbook ScwLbIpamServicesNotConverged."
	for _, o := range []struct {
		names bool
		fix   string
	}{{true, fix.String()}, {true, runbook}, {false, runbook}} {
		out := header + noteLines(fs, o.names) + o.fix
		if len(out) <= noteLengthLimit {
			return out
		}
	}
	return truncateNote(header+noteLines(fs, false)+runbook, noteLengthLimit)
}

// noteLines are the note's lines, one per IP, with the holders' names or
// without.
func noteLines(fs []finding, names bool) string {
	var b strings.Builder
	for _, f := range fs {
		addr := f.address
		if addr == "" {
			addr = "unknown address"
		}
		fmt.Fprintf(&b, "\nIPAM IP %s (%s) [%s] ", f.id, addr, f.reason)
		switch {
		case f.reason == ReasonGone:
			b.WriteString("gone from IPAM")
		case f.reason == ReasonNotInStatus:
			b.WriteString("on its Load Balancer")
		case f.resource == nil:
			b.WriteString("attached to nothing")
		default:
			fmt.Fprintf(&b, "attached to %s/%s", f.resource.Type, f.resource.ID)
			if names && f.resource.Name != "" {
				fmt.Fprintf(&b, " (%s)", f.resource.Name)
			}
		}
	}
	return b.String()
}

// truncateNote cuts s to at most limit bytes, on a line boundary where one
// is near, never inside a UTF-8 sequence.
func truncateNote(s string, limit int) string {
	const more = "\n…"
	if len(s) <= limit {
		return s
	}
	cut := limit - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl > limit/2 {
		cut = nl
	}
	return s[:cut] + more
}

// noteLine is one IP line of a note, as note writes it.
var noteLine = regexp.MustCompile(`^IPAM IP (\S+) \([^)]*\) \[(\w+)\] (?:attached to (\S+/\S+)|attached to nothing|gone from IPAM|on its Load Balancer)`)

// parseNote reads the cause back from a note: the findings' keys, sorted as
// causeOf sorts them.
func parseNote(s string) string {
	var parts []string
	for _, line := range strings.Split(s, "\n") {
		m := noteLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k := m[1] + "=" + m[2]
		if m[3] != "" {
			k += "@" + m[3]
		}
		parts = append(parts, k)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// restore rebuilds the monitor's memory at the start of a leader term from
// the IPNotApplied Events the previous leader recorded (one List): a
// Service whose latest such Event names its current cause is counted at
// once and not given that Event again, so a failover neither drops the
// gauge nor repeats the Event. What the previous term of this replica left
// is dropped: it may be stale by the length of the other leader's terms.
func (s *Sweeper) restore(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.notConverged)
	if s.o.Events == nil {
		return
	}
	var list eventsv1.EventList
	if err := s.o.Events.List(ctx, &list, client.MatchingFields{"reason": EventReasonIPNotApplied}); err != nil {
		s.o.Log.Error(err, "reading the IPNotApplied Events of the previous leader; Services not converged get a fresh grace and Event")
		return
	}
	latest := map[types.UID]*eventsv1.Event{}
	for i := range list.Items {
		e := &list.Items[i]
		if e.Regarding.Kind != "Service" || e.Regarding.UID == "" {
			continue
		}
		if prev := latest[e.Regarding.UID]; prev == nil || lastSeen(e).After(lastSeen(prev)) {
			latest[e.Regarding.UID] = e
		}
	}
	// Past the grace already: the Event says it was.
	since := s.o.Clock.Now().Add(-s.o.ConvergenceGrace)
	for uid, e := range latest {
		cause := parseNote(e.Note)
		if cause == "" {
			continue
		}
		st := &notConverged{since: map[string]time.Time{}, reads: map[string]goneRead{}, reported: cause}
		for _, k := range strings.Split(cause, ",") {
			st.since[k] = since
		}
		s.notConverged[uid] = st
	}
}

// lastSeen is when an Event was last recorded: its series' last
// observation, else its eventTime, else its creation.
func lastSeen(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
