package sweeper

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// DefaultConvergenceGrace is how long a Service may take to show its
// reserved IPs on its Load Balancer before it is reported: the CCM creates
// and attaches a Load Balancer in a minute or two.
const DefaultConvergenceGrace = 5 * time.Minute

// EventReasonIPNotApplied is recorded (Warning) on a Service whose reserved
// IPs are not on its Load Balancer past the convergence grace, once per
// cause.
const EventReasonIPNotApplied = "IPNotApplied"

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

// watched is a live Service that references IDs: the cache's object, read
// in place (see services), and the IDs it references.
type watched struct {
	svc *servicecache.Record
	ids []string
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
func (s *Sweeper) monitor(ctx context.Context, ws []watched, listed map[string]attachment, claimed map[string]bool, now time.Time, rep *Report) {
	rep.NotConverged = map[string]int{}
	for _, r := range reasons {
		rep.NotConverged[r] = 0
	}
	seen := map[types.UID]bool{}
	for _, w := range ws {
		t := TargetOf(w.svc)
		findings, known := judge(w.ids, t, listed, claimed)
		uid := w.svc.UID
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
		st.due = s.confirmGone(ctx, t, st, due, now)
		countReasons(st.due, rep)
		if len(st.due) == 0 {
			continue
		}
		if cause := causeOf(st.due); cause != st.reported {
			st.reported = cause
			s.event(refOf(w.svc).object(), corev1.EventTypeWarning, EventReasonIPNotApplied, "%s", note(t, st.due, now.Sub(earliest(st.since, st.due))))
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
func (s *Sweeper) confirmGone(ctx context.Context, t Target, st *notConverged, due []finding, now time.Time) []finding {
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
				if reason := Classify(t, ip, false); slices.Contains(reasons, reason) {
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

// judge classifies each ID a live Service references; known is false when
// an ID could not be judged because the claims were not read.
func judge(ids []string, t Target, listed map[string]attachment, claimed map[string]bool) (out []finding, known bool) {
	known = true
	for i, id := range ids {
		var ip *scaleway.IP
		if a, ok := listed[id]; ok {
			ip = &scaleway.IP{ID: id, Address: a.address, Resource: a.resource}
		}
		byo := slices.Contains(t.BringYourOwn, id)
		if ip == nil && claimed == nil && !byo {
			known = false
			continue
		}
		reason := Classify(t, ip, byo || claimed[id])
		if !slices.Contains(reasons, reason) {
			continue
		}
		f := finding{id: id, reason: reason}
		switch {
		case ip != nil:
			f.address, f.resource = ip.Address.String(), ip.Resource
		case len(t.Addresses) == len(ids):
			// The webhook writes the addresses in the order of the IDs.
			f.address = t.Addresses[i]
		}
		out = append(out, f)
	}
	return out, known
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
		for _, k := range ccm.Items(cause) {
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
