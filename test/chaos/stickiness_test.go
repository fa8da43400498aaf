package chaos

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// created is a successful CREATE in an opted-in namespace: when the client
// sent it and the IDs the Service got.
type created struct {
	svc        string // ns/name
	start, end time.Time
	ids        []string
	// address asked for, if any: only a reservation of that address is
	// its to take back.
	address string
}

// history is one IP's life from the emulator's audit log.
type history struct {
	address          netip.Addr
	booked, released time.Time // released zero while it exists
	tags             []struct {
		at   time.Time
		tags []string
	}
	attach []attachment
}

// attachment is an attach or detach of an IP, and the Load Balancer's.
type attachment struct {
	at       time.Time
	attached bool
	lb       string
}

func (h *history) existsAt(t time.Time) bool {
	return !h.booked.After(t) && (h.released.IsZero() || h.released.After(t))
}

func (h *history) entryAt(t time.Time) (ipam.Entry, bool) {
	var tags []string
	for _, s := range h.tags {
		if !s.at.After(t) {
			tags = s.tags
		}
	}
	return ipam.ParseEntry(tags)
}

// landedAfter reports whether the IP was attached, after t, to a Load
// Balancer other than the one it was last attached to before t: the
// re-created Service's new one, by the CCM.
func (h *history) landedAfter(t time.Time) bool {
	before := ""
	for _, a := range h.attach {
		switch {
		case !a.at.After(t):
			if a.attached {
				before = a.lb
			}
		case a.attached && a.lb != before:
			return true
		}
	}
	return false
}

func (h *history) attachedAt(t time.Time) bool {
	on := false
	for _, a := range h.attach {
		if !a.at.After(t) {
			on = a.attached
		}
	}
	return on
}

func histories(audit []emulator.AuditEvent) map[string]*history {
	out := map[string]*history{}
	for _, ev := range audit {
		if ev.IPID == "" {
			continue
		}
		h := out[ev.IPID]
		if h == nil {
			h = &history{}
			out[ev.IPID] = h
		}
		switch ev.Kind {
		case emulator.AuditBook:
			h.booked, h.address = ev.Time, ev.Address
		case emulator.AuditRelease:
			h.released = ev.Time
			continue
		case emulator.AuditAttach, emulator.AuditDetach:
			lb := ev.LBID
			if lb == "" && ev.Resource != nil && ev.Resource.Type == "lb_server" {
				lb = ev.Resource.ID
			}
			h.attach = append(h.attach, attachment{ev.Time, ev.Kind == emulator.AuditAttach, lb})
			continue
		}
		h.tags = append(h.tags, struct {
			at   time.Time
			tags []string
		}{ev.Time, ev.Tags})
	}
	return out
}

// cacheLag bounds how long after a Service showed an ID every replica's
// Service cache shows it too: the watch's delivery, tens to a few hundred
// milliseconds on a loaded machine. Until then a replica that did not book
// the ID itself has no hint of it (Allocator.Remember), and its index
// knows it only from its next listing.
const cacheLag = time.Second

// miss is a create that did not get its previous address back although
// the release protocol let it: a fresh IP instead, or another earlier
// reservation of its Service.
type miss struct {
	c         created
	got       string    // the ID it got
	fresh     bool      // got was booked for it, not taken back
	at        time.Time // when that was booked (or, taken back, the create's start)
	prev      string    // its previous address's ID
	prevShown time.Time // when a Service first showed prev
	attached  bool      // prev was still attached to the previous Load Balancer
	why       string    // the explanation; "" when there is none
	note      string    // what the design's rule made of it
}

// stickiness is invariant 8 checked over the run's successful creates:
// each that found an earlier reservation of its Service and pool in IPAM
// which the release protocol let it take back (within the retention,
// outside the safety margin) must have taken back its previous address:
// of those, the one a Service showed last (the previous incarnation's, or
// the previous write's).
//
// A fresh IP instead is explained, and not a violation, when
//   - no Service ever showed the earlier reservations: they were pending,
//     booked by an admission whose CREATE then failed, on another replica
//     or with the answer lost; they were never a Service's address, and
//     the replica that answered could not know them before its next
//     listing. The sweeper releases them after the pending grace;
//     invariant 3 checks nothing is left;
//   - the previous address was first shown by a Service less than
//     cacheLag before the booking: the replica that answered may not have
//     seen that Service yet (a re-create right after a create).
//
// Taking back another earlier reservation, one the design's rule prefers
// (a live Service used it, its uid back-filled, first; then the oldest
// booking), is explained when
//   - the create that got the previous address pinned it (address:) and
//     this one asks for the pool: another request, not the same manifest
//     created again;
//   - it is an older address of the Service (a Service showed it before
//     the previous one): the previous address was then a miss itself, or
//     short-lived.
//
// Taking back a pending booking instead of the previous address is not:
// the design's rule cannot tell them apart while the previous address's
// uid is not back-filled, although the replica's Service cache showed it.
type stickiness struct {
	err                       error
	reusable, reused, pending int
	// whileHeld are take-backs admitted while the previous Load Balancer
	// (to_delete) still held the IP: the CCM attaches it once that one is
	// gone.
	whileHeld int
	// landed are take-backs the CCM then attached to a new Load Balancer,
	// from the emulator's audit log; the others' Service was deleted or
	// changed before the CCM got to it.
	landed int
	misses []miss
}

func (r *run) stickiness() *stickiness {
	cfg, err := ipam.ParseConfig([]byte(r.env.PoolFile()))
	if err != nil {
		return &stickiness{err: err}
	}
	r.mu.Lock()
	creates := slices.Clone(r.creates)
	shown := maps.Clone(r.shown)
	r.mu.Unlock()
	return checkStickiness(histories(r.env.Emu.Audit()), cfg, creates, shown)
}

// checkStickiness checks creates against the IPs' histories; shown is when
// a Service first showed each ID.
func checkStickiness(hist map[string]*history, cfg *ipam.Config, creates []created, shown map[string]time.Time) *stickiness {
	out := &stickiness{}
	policy := ipam.Retention{PendingGrace: pendingGrace, Margin: 2 * 3 * time.Second}
	shownBefore := func(id string, t time.Time) (time.Time, bool) {
		at, ok := shown[id]
		return at, ok && at.Before(t)
	}
	for _, c := range creates {
		for _, id := range c.ids {
			h := hist[id]
			if h == nil {
				continue // bring-your-own: booked before the run
			}
			got, ok := h.entryAt(h.booked)
			if !ok || got.Service.String() != c.svc {
				continue
			}
			// When the admission decided: the booking of a fresh IP (a
			// client's retries can put it well after the CREATE was sent);
			// a take-back is not dated, the CREATE's start stands for it.
			at, fresh := c.start, !h.booked.Before(c.start)
			if fresh {
				at = h.booked
			}
			// The earlier reservations of the Service and pool it could
			// have taken back then.
			var cands []string
			for other, oh := range hist {
				if other == id || !oh.existsAt(at) || !oh.booked.Before(c.start) {
					continue
				}
				e, ok := oh.entryAt(at)
				if !ok || e.Service != got.Service || e.Pool != got.Pool || !reusable(cfg, policy, e, at) ||
					(c.address != "" && oh.address.String() != c.address) {
					continue
				}
				cands = append(cands, other)
			}
			if !fresh {
				cands = append(cands, id)
			}
			if len(cands) == 0 {
				continue
			}
			out.reusable++
			// The previous address: the candidate a Service showed last.
			prev, prevShown := "", time.Time{}
			for _, cand := range cands {
				if t, ok := shownBefore(cand, at); ok && t.After(prevShown) {
					prev, prevShown = cand, t
				}
			}
			switch {
			case prev == id, prev == "" && !fresh:
				out.reused++
				if !fresh && h.attachedAt(c.end) {
					out.whileHeld++
				}
				if h.landedAfter(c.start) {
					out.landed++
				}
				continue
			case prev == "":
				out.pending++
				continue
			}
			m := miss{c: c, got: id, fresh: fresh, at: at, prev: prev, prevShown: prevShown, attached: hist[prev].attachedAt(at)}
			gotShown, gotWasShown := shownBefore(id, at)
			switch {
			case fresh && at.Sub(prevShown) < cacheLag:
				m.why = fmt.Sprintf("cache lag: a Service first showed %s %s before the booking", prev, at.Sub(prevShown).Round(time.Millisecond))
			case fresh:
			case preferred(hist, cands, at) != id:
				m.note = "not the one the design's rule (uid back-filled first, then the oldest booking) takes"
			default:
				m.note = preference(hist, id, prev, at)
				if p, ok := pinnedBy(creates, prev, c); ok {
					// Not a re-create of the same manifest: invariant 8
					// does not say which address it gets.
					m.why = fmt.Sprintf("the request changed: the create that got %s asked for address %s, this one for the pool", prev, p)
				} else if gotWasShown && gotShown.Before(prevShown) {
					// An older address of the Service: the previous one
					// was itself a miss (a fresh IP the cache lag
					// explains) or short-lived.
					m.why = fmt.Sprintf("%s is the Service's older address (first shown at %s)", id, stamp(gotShown))
				} else {
					m.note += "; " + id + " was never a Service's address (a pending booking)"
				}
			}
			out.misses = append(out.misses, m)
		}
	}
	return out
}

// preferred is the reservation an admission at t takes back among cands,
// by the design's rule: one a live Service used (its uid back-filled)
// first, then the oldest booking.
func preferred(hist map[string]*history, cands []string, t time.Time) string {
	best := ""
	var bestUID bool
	for _, id := range cands {
		e, _ := hist[id].entryAt(t)
		uid := e.UID != ""
		if best == "" || (uid && !bestUID) || (uid == bestUID && hist[id].booked.Before(hist[best].booked)) {
			best, bestUID = id, uid
		}
	}
	return best
}

// pinnedBy finds whether the create that got id before c asked for
// another address than c does.
func pinnedBy(creates []created, id string, c created) (string, bool) {
	for _, o := range creates {
		if o.svc == c.svc && o.start.Before(c.start) && slices.Contains(o.ids, id) {
			return o.address, o.address != "" && o.address != c.address
		}
	}
	return "", false
}

// preference tells why the design's rule took got back rather than prev.
func preference(hist map[string]*history, got, prev string, t time.Time) string {
	g, _ := hist[got].entryAt(t)
	p, _ := hist[prev].entryAt(t)
	if g.UID != "" && p.UID == "" {
		return "the design prefers a reservation a live Service used (its uid back-filled), and " + prev + "'s uid was not back-filled yet"
	}
	s := fmt.Sprintf("the design prefers the oldest booking (%s booked at %s, %s at %s)", got, stamp(hist[got].booked), prev, stamp(hist[prev].booked))
	if g.UID == "" {
		s += ", neither uid back-filled"
	}
	return s
}

func (s *stickiness) violations() []string {
	if s.err != nil {
		return []string{"the pool file: " + s.err.Error()}
	}
	var out []string
	for _, m := range s.misses {
		if m.why == "" {
			out = append(out, m.String())
		}
	}
	return out
}

func (m miss) String() string {
	what := "a fresh IP " + m.got + " booked at " + stamp(m.at)
	if !m.fresh {
		what = "another earlier reservation " + m.got
	}
	s := fmt.Sprintf("%s (CREATE sent %s) got %s instead of its previous address %s, which a Service first showed at %s",
		m.c.svc, stamp(m.c.start), what, m.prev, stamp(m.prevShown))
	if m.attached {
		s += " and the previous Load Balancer still held"
	}
	if m.why != "" {
		s += ": " + m.why
	}
	if m.note != "" {
		s += " (" + m.note + ")"
	}
	return s
}

func (s *stickiness) summary() string {
	if s.err != nil {
		return "  stickiness: " + s.err.Error() + "\n"
	}
	var lagged, freshBad, other, otherBad, attached int
	var maxLag time.Duration
	for _, m := range s.misses {
		switch {
		case !m.fresh && m.why == "":
			otherBad++
		case !m.fresh:
			other++
		case m.why == "":
			freshBad++
		default:
			lagged++
			maxLag = max(maxLag, m.at.Sub(m.prevShown))
		}
		if m.attached {
			attached++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  stickiness (invariant 8): %d creates found an earlier reservation of their Service and pool to take back\n"+
		"    took back their previous address: %d (%d while the previous Load Balancer still held it; %d then attached by the CCM to a new Load Balancer)\n"+
		"    another earlier reservation: %d explained (a changed request, or the Service's older address), %d unexplained\n"+
		"    fresh IP instead: %d pending (no Service had shown them: booked by an admission whose CREATE failed),\n"+
		"      %d their previous address shown less than %s before (cache lag, at most %s), %d unexplained\n"+
		"    (%d of the misses still attached to the previous Load Balancer)\n",
		s.reusable, s.reused, s.whileHeld, s.landed, other, otherBad, s.pending, lagged, cacheLag, maxLag.Round(time.Millisecond), freshBad, attached)
	if os.Getenv("CHAOS_DEBUG") != "" {
		for _, m := range s.misses {
			fmt.Fprintf(&b, "    miss: %s\n", m)
		}
	}
	return b.String()
}

// recordCreate keeps a successful create for stickiness.
func (r *run) recordCreate(ns, name string, start time.Time, ann map[string]string) {
	ids := ccm.ReferencedIDs(fixtures.Service(ns, name, ann))
	if len(ids) == 0 || ns == "plain" {
		return
	}
	r.mu.Lock()
	r.creates = append(r.creates, created{svc: ns + "/" + name, start: start, end: time.Now(), ids: ids, address: ann[request.AnnotationAddress]})
	r.mu.Unlock()
}

// reusable is the admissions' reuse rule for a reservation the chaos run
// tags with pool names that never change.
func reusable(cfg *ipam.Config, policy ipam.Retention, e ipam.Entry, at time.Time) bool {
	p, _ := cfg.Pool(e.Pool)
	return policy.Reusable(p, e, at)
}
