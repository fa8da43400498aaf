package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// ccmLag bounds how long after a write of a Service the CCM may still be
// acting on it: its one service worker acts on the version its queue gave
// it, a sync makes a dozen Scaleway calls that the faults can each answer
// faultDelay late, and a failed sync is retried after 5 s. A move of the address up to ccmLag after an
// allow-ip-change write can be the CCM catching up with it, even when a
// later write came in between.
const ccmLag = 20 * time.Second

// allowedMove is a write that let a Service's address change: a pool
// change with allow-ip-change (or a create carrying it).
type allowedMove struct {
	at time.Time // when the client sent it: the CCM can act on it only later
	// outside: the Service is in a namespace the webhook leaves alone.
	outside bool
	// ids are what the Service asked for once it was made; nil when the
	// apiserver's answer was lost, so what it asked for is unknown.
	ids map[string]bool
}

// asks reports whether the write asked the Load Balancer to hold id.
func (m allowedMove) asks(id string) bool { return m.ids == nil || m.ids[id] }

// leaves reports whether the write asked the Load Balancer to let id go.
func (m allowedMove) leaves(id string) bool { return m.ids == nil || !m.ids[id] }

// allow records an allow-ip-change write of svc sent at start; lost is the
// error when the apiserver's answer did not come.
func (r *run) allow(svc *corev1.Service, start time.Time, lost error) {
	m := allowedMove{at: start, outside: svc.Namespace == "plain" || svc.Namespace == "kube-system"}
	if lost == nil {
		m.ids = map[string]bool{}
		for _, id := range ccm.ReferencedIDs(svc) {
			m.ids[id] = true
		}
	}
	r.mu.Lock()
	r.allowed[string(svc.UID)] = append(r.allowed[string(svc.UID)], m)
	r.mu.Unlock()
}

// explains reports whether one of moves, sent before t, can be what the CCM
// acted on at t and asked for the change ok accepts: the last such write,
// or any within ccmLag before t (the CCM may be finishing a pass on it).
func explains(moves []allowedMove, t time.Time, ok func(allowedMove) bool) bool {
	last := -1
	for i, m := range moves {
		if m.at.After(t) {
			continue
		}
		if last < 0 || m.at.After(moves[last].at) {
			last = i
		}
		if t.Sub(m.at) <= ccmLag && ok(m) {
			return true
		}
	}
	return last >= 0 && ok(moves[last])
}

// lbLog is the part of the audit log about one Load Balancer, as
// emulator's LBAudit selects it, up to its deletion.
type lbLog struct {
	id, uid string // uid: the UID of the Service it was made for, its name after testenv.CCMPrefix
	deleted time.Time
	events  []emulator.AuditEvent // attaches and detaches while it was live
	all     []emulator.AuditEvent // everything, its end included
}

// byLoadBalancer splits the audit log by Load Balancer in one pass (what
// LBAudit does for one), oldest first. An attach or detach made by the Load
// Balancer API names it (LBID), one made through IPAM names it as the
// lb_server resource; either carries its name.
func byLoadBalancer(audit []emulator.AuditEvent) []*lbLog {
	byID := map[string]*lbLog{}
	var out []*lbLog
	for _, ev := range audit {
		id := ev.LBID
		if id == "" && ev.Resource != nil && ev.Resource.Type == "lb_server" {
			id = ev.Resource.ID
		}
		if id == "" {
			continue
		}
		lb := byID[id]
		if lb == nil {
			lb = &lbLog{id: id}
			byID[id] = lb
			out = append(out, lb)
		}
		lb.all = append(lb.all, ev)
		if ev.Resource != nil && ev.Resource.ID == id && lb.uid == "" {
			lb.uid = strings.TrimPrefix(ev.Resource.Name, testenv.CCMPrefix)
		}
		switch {
		case ev.Kind == emulator.AuditDeleteLB:
			lb.deleted = ev.Time
		case !lb.deleted.IsZero():
			// Its end: the detaches of a Load Balancer being deleted are
			// not a live one's address changing.
		case ev.Kind == emulator.AuditAttach, ev.Kind == emulator.AuditDetach:
			lb.events = append(lb.events, ev)
		}
	}
	return out
}

// addressLoss is a live Load Balancer's address on a Private Network going
// with no allow-ip-change write asking for it: detached, then maybe
// attached again (the same ID, or another).
type addressLoss struct {
	lb      *lbLog
	svc     string
	pn      string // the network's name in the run
	id      string
	address string
	at      time.Time
	back    string // the ID attached next on that network, "" if none
	backAt  time.Time
}

// liveAddresses is invariant 7 checked from the emulator's attach and
// detach log: a Load Balancer's address on a Private Network is the IP
// attached to it there. From its first attach on a network until its
// deletion is accepted (to_delete: what comes after is its end, not a
// change), each change must be one an allow-ip-change write of its Service
// asked for (see explains): a detach of an ID the write no longer asks
// for, an attach of one it asks for. The first attach on a network is the
// Load Balancer getting its address, not changing it (the CCM attaches a
// re-created Service's network once the previous Load Balancer lets the IP
// go, seconds later).
//
// What is counted: each loss, a detach of an address no such write asked
// to let go, is one violation, whatever follows. The attach that follows it
// on that network belongs to it: the same ID attached again (what a
// re-apply that dropped the pool's network from pn-ids did, finding 1 of
// issue 19: an outage, the address back by luck), another ID (a new
// address), or none before the Load Balancer's deletion. An attach that no
// write asked for on a network the Load Balancer had already had an
// address on, without a loss before it, is one violation too.
type liveAddresses struct {
	lbs, attached, moves int
	// writes are the allow-ip-change writes in opted-in namespaces,
	// lostAnswers those of them the apiserver's answer did not come back
	// for; outside those of Services the webhook leaves alone.
	writes, lostAnswers, outside int
	// reapplied are the re-applies and replaces made while the Service's
	// Load Balancer held an address: what the webhook must keep a no-op.
	reapplied  int
	anonymous  []string // Load Balancers whose Service the run never saw
	losses     []*addressLoss
	violations []string
}

func (r *run) liveAddresses() *liveAddresses {
	r.mu.Lock()
	uids := maps.Clone(r.uids)
	allowed := maps.Clone(r.allowed)
	journal := slices.Clone(r.journal)
	r.mu.Unlock()
	pnName := map[string]string{}
	for name, pn := range r.env.PNs {
		pnName[pn.ID] = name
	}
	return checkLiveAddresses(r.env.Emu.Audit(), uids, allowed, journal, pnName)
}

// checkLiveAddresses checks the audit log: uids names the Service of each
// UID, allowed are the allow-ip-change writes by Service UID, journal the
// operations, pnName each Private Network's name.
func checkLiveAddresses(audit []emulator.AuditEvent, uids map[string]string, allowed map[string][]allowedMove, journal []journalEntry, pnName map[string]string) *liveAddresses {
	out := &liveAddresses{}
	for _, moves := range allowed {
		for _, m := range moves {
			switch {
			case m.outside:
				out.outside++
			case m.ids == nil:
				out.lostAnswers++
				fallthrough
			default:
				out.writes++
			}
		}
	}
	lbs := byLoadBalancer(audit)
	for _, lb := range lbs {
		out.lbs++
		svc := uids[lb.uid]
		if svc == "" && len(lb.events) > 0 {
			out.anonymous = append(out.anonymous, lb.id)
			svc = "a Service the run never saw (uid " + lb.uid + ")"
		}
		moves := allowed[lb.uid]
		cur := map[string]map[string]bool{} // network → IDs attached
		open := map[string]*addressLoss{}   // network → a loss no attach followed yet
		for _, ev := range lb.events {
			pn := ev.PrivateNetworkID
			switch ev.Kind {
			case emulator.AuditAttach:
				out.attached++
				had := cur[pn] != nil
				before := slices.Sorted(maps.Keys(cur[pn]))
				if !had {
					cur[pn] = map[string]bool{}
				}
				cur[pn][ev.IPID] = true
				if loss := open[pn]; loss != nil {
					loss.back, loss.backAt = ev.IPID, ev.Time
					delete(open, pn)
					continue
				}
				if !had {
					continue // its first address on that network
				}
				if explains(moves, ev.Time, func(m allowedMove) bool { return m.asks(ev.IPID) }) {
					out.moves++
					continue
				}
				out.violations = append(out.violations, fmt.Sprintf("Load Balancer %s of %s got %s (%s) on network %s at %s, after %v there, and no allow-ip-change write asked for it; %s",
					lb.id, svc, ev.IPID, ev.Address, pnName[pn], stamp(ev.Time), before, story(lb, svc, journal, pnName)))
			case emulator.AuditDetach:
				if cur[pn] != nil {
					delete(cur[pn], ev.IPID)
				}
				if explains(moves, ev.Time, func(m allowedMove) bool { return m.leaves(ev.IPID) }) {
					out.moves++
					continue
				}
				loss := &addressLoss{lb: lb, svc: svc, pn: pnName[pn], id: ev.IPID, address: ev.Address.String(), at: ev.Time}
				open[pn] = loss
				out.losses = append(out.losses, loss)
			}
		}
	}
	out.reapplied = reappliedLive(lbs, journal)
	for _, l := range out.losses {
		out.violations = append(out.violations, fmt.Sprintf("Load Balancer %s of %s lost %s (%s) on network %s at %s with no allow-ip-change write asking for it, %s; %s",
			l.lb.id, l.svc, l.id, l.address, l.pn, stamp(l.at), l.aftermath(), story(l.lb, l.svc, journal, pnName)))
	}
	return out
}

// reappliedLive counts the re-applies and replaces of the journal made
// after the Service's Load Balancer got its first address and before its
// deletion.
func reappliedLive(lbs []*lbLog, journal []journalEntry) int {
	n := 0
	for _, lb := range lbs {
		if len(lb.events) == 0 {
			continue
		}
		for _, e := range journal {
			if e.uid == lb.uid && e.outcome == "ok" && (e.op == "re-apply" || e.op == "replace") &&
				e.start.After(lb.events[0].Time) && (lb.deleted.IsZero() || e.end.Before(lb.deleted)) {
				n++
			}
		}
	}
	return n
}

// aftermath tells what followed a loss on its network.
func (l *addressLoss) aftermath() string {
	switch {
	case l.back == l.id:
		return fmt.Sprintf("attached again with the same ID %s later", l.backAt.Sub(l.at).Round(time.Millisecond))
	case l.back != "":
		return fmt.Sprintf("replaced by %s %s later", l.back, l.backAt.Sub(l.at).Round(time.Millisecond))
	case !l.lb.deleted.IsZero():
		return fmt.Sprintf("nothing attached there again before its deletion at %s", stamp(l.lb.deleted))
	}
	return "nothing attached there again by the end of the run"
}

// story is a violation's context: the Load Balancer's log and its
// Service's operations over its life.
func story(lb *lbLog, svc string, journal []journalEntry, pnName map[string]string) string {
	var evs []string
	for _, ev := range lb.all {
		s := stamp(ev.Time) + " " + string(ev.Kind)
		if ev.IPID != "" {
			s += fmt.Sprintf(" %s (%s) on %s", ev.IPID, ev.Address, pnName[ev.PrivateNetworkID])
		}
		if ev.Op != "" {
			s += " by " + string(ev.Op)
		}
		evs = append(evs, s)
	}
	from, to := time.Time{}, time.Now()
	if len(lb.all) > 0 {
		from, to = lb.all[0].Time.Add(-10*time.Second), lb.all[len(lb.all)-1].Time
	}
	var ops []string
	for _, e := range journal {
		if e.svc != svc || e.end.Before(from) || e.start.After(to) {
			continue
		}
		s := fmt.Sprintf("%s-%s %s %s", stamp(e.start), stamp(e.end), e.op, e.outcome)
		if e.uid != "" {
			s += fmt.Sprintf(" (uid %s, private-ip-ids %q)", e.uid, e.ids)
		}
		ops = append(ops, s)
	}
	return fmt.Sprintf("the Load Balancer's log: [%s]; the Service's operations: [%s]", strings.Join(evs, ", "), strings.Join(ops, ", "))
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

func (a *liveAddresses) summary() string {
	var b strings.Builder
	back := 0
	for _, l := range a.losses {
		if l.back == l.id {
			back++
		}
	}
	fmt.Fprintf(&b, "  live Load Balancers (invariant 7): %d, %d addresses attached while live; %d re-applies and replaces made while one held its address\n"+
		"    %d moves asked for by the %d allow-ip-change writes (%d unanswered; %d more creates with it in opted-out namespaces)\n"+
		"    %d addresses lost with no allow-ip-change write (%d attached again with the same ID)\n",
		a.lbs, a.attached, a.reapplied, a.moves, a.writes, a.lostAnswers, a.outside, len(a.losses), back)
	if len(a.anonymous) > 0 {
		fmt.Fprintf(&b, "    Load Balancers of a Service the run never saw: %v\n", a.anonymous)
	}
	return b.String()
}
