package sweeper

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// Publisher writes the view of each cycle (view.Mirror).
type Publisher interface {
	// Reset forgets what the view holds: a new leader term reads it anew.
	Reset()
	Publish(ctx context.Context, snap *view.Snapshot) (view.Writes, error)
}

// row notes the IPReservation of one of this cluster's reservations, its
// ledger e as the cycle leaves it.
func (c *cycle) row(ip *ipam.Reservation, e ipam.Entry, state string) {
	if c.s.o.View == nil {
		return
	}
	ns := e.JudgedNamespace()
	st := view.ReservationStatus{Address: ip.Address.String(), Pool: e.Pool, Service: e.Service.Name, State: state}
	if e.Service.Namespace != ns {
		st.Service = e.Service.String()
	}
	if ip.Resource != nil {
		st.AttachedTo = ip.Resource.Type + "/" + ip.Resource.ID
		if ip.Resource.Name != "" {
			st.AttachedTo += " (" + ip.Resource.Name + ")"
		}
	}
	if state != view.StateLive {
		pool, _ := c.cfg.PoolOf(e, ip.SubnetID, ip.Address)
		if at, ok := c.s.policy.When(pool, e); ok {
			st.ReleaseAt = &metav1.Time{Time: at}
		}
		if !e.OrphanedSince.IsZero() {
			st.RetainedSince = &metav1.Time{Time: e.OrphanedSince}
		}
	}
	c.rows = append(c.rows, view.Reservation{ID: ip.ID, Namespace: ns, Status: st})
}

// publish writes the cycle's view: its reservations but those it released,
// and the conditions of every watched Service (conditions), those of a
// Service no longer watched removed. claimed are the IDs the claims name,
// as the monitor reads them.
func (c *cycle) publish(ctx context.Context, claimed map[string]bool) {
	s := c.s
	services, err := s.services(ctx)
	if err != nil {
		c.rep.Errors++
		s.o.Log.Error(err, "reading the Services for their conditions; the view waits for the next cycle")
		return
	}
	conds, unknown := conditions(c.view.services, c.listed, claimed)
	released := make(map[string]bool, len(c.rep.Released))
	for _, id := range c.rep.Released {
		released[id] = true
	}
	snap := &view.Snapshot{Reservations: c.rows[:0], Services: conds}
	for _, r := range c.rows {
		if !released[r.ID] {
			snap.Reservations = append(snap.Reservations, r)
		}
	}
	judged := make(map[types.NamespacedName]bool, len(conds))
	for _, sc := range conds {
		judged[types.NamespacedName{Namespace: sc.Namespace, Name: sc.Name}] = true
	}
	for _, svc := range services {
		if svc.Conditions != 0 && !svc.Deleting() && !judged[svc.Key()] && !unknown[svc.Key()] {
			snap.Services = append(snap.Services, view.ServiceConditions{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID), Digest: svc.Conditions})
		}
	}
	w, err := s.o.View.Publish(ctx, snap)
	c.rep.View = w
	switch {
	case err != nil:
		c.rep.Errors++
		s.o.Log.Error(err, "writing the view of the reservations; the ledger is unaffected")
	case w.Errors > 0:
		s.o.Log.Info("writing the view of the reservations: some writes failed, retried at the next cycle; the ledger is unaffected", "failed", w.Errors, "first", w.Failed.Error())
	}
}

// conditions are the Reserved and Applied conditions of every watched
// Service scw-lb-ipam admitted, from the cycle's listing and what the
// monitor judges of it (judge); a Service whose IDs cannot be told this
// cycle (the claims were not read) is in unknown, and keeps its
// conditions.
func conditions(ws []watched, listed map[string]attachment, claimed map[string]bool) (out []view.ServiceConditions, unknown map[types.NamespacedName]bool) {
	out, unknown = make([]view.ServiceConditions, 0, len(ws)), map[types.NamespacedName]bool{}
	for _, w := range ws {
		t := TargetOf(w.svc)
		if len(t.Addresses) == 0 && len(t.BringYourOwn) == 0 {
			// Not admitted by scw-lb-ipam (IDs written by hand, a namespace
			// not opted in): nothing of ours to say, and any condition of
			// ours left from before is removed (publish).
			continue
		}
		findings, known := judge(w.ids, t, listed, claimed)
		if !known {
			unknown[w.svc.Key()] = true
			continue
		}
		out = append(out, view.ServiceConditions{Namespace: w.svc.Namespace, Name: w.svc.Name, UID: string(w.svc.UID), Digest: w.svc.Conditions,
			Conditions: []metav1.Condition{reserved(w, t, listed, claimed), applied(t, findings, len(w.ids))}})
	}
	return out, unknown
}

// reserved is the Reserved condition of a watched Service.
func reserved(w watched, t Target, listed map[string]attachment, claimed map[string]bool) metav1.Condition {
	c := metav1.Condition{Type: view.ConditionReserved, Status: metav1.ConditionTrue, Reason: "Reserved"}
	var held, problems []string
	key := w.svc.Key()
	for _, id := range w.ids {
		a, ok := listed[id]
		switch {
		case !ok && (claimed[id] || slices.Contains(t.BringYourOwn, id)):
			held = append(held, fmt.Sprintf("IPAM IP %s (brought with %s)", id, request.AnnotationIPAMIDs))
		case !ok:
			problems = append(problems, fmt.Sprintf("IPAM IP %s is not in IPAM: released or deleted out of band (see the Applied condition for the way back)", id))
			c.Reason = "GoneFromIPAM"
		case a.ours && !a.holds(key):
			problems = append(problems, fmt.Sprintf("IPAM IP %s (%s) is booked for %s, not this Service: remove it from %s", id, a.address, a.bookedFor, ccm.AnnotationPrivateIPIDs))
			c.Reason = "BookedForAnother"
		case !a.ours:
			held = append(held, fmt.Sprintf("IPAM IP %s (%s), not booked by scw-lb-ipam", id, a.address))
		default:
			held = append(held, fmt.Sprintf("IPAM IP %s (%s) in pool %s", id, a.address, a.pool.Value()))
		}
	}
	if len(problems) > 0 {
		c.Status, c.Message = metav1.ConditionFalse, strings.Join(problems, "; ")
		return c
	}
	c.Message = strings.Join(held, "; ")
	return c
}

// conditionReasons are the Applied condition's reasons for the monitor's.
var conditionReasons = map[string]string{
	ReasonNotAttached:       "NotAttached",
	ReasonAttachedElsewhere: "AttachedElsewhere",
	ReasonGone:              "GoneFromIPAM",
	ReasonNotInStatus:       "NotInStatus",
}

// applied is the Applied condition of a watched Service: what the monitor
// judged of its IDs now, without its grace (the Event and the gauge wait
// for the grace; a condition says what is). Its message names no
// duration, so that it changes only when the findings do.
func applied(t Target, findings []finding, ids int) metav1.Condition {
	c := metav1.Condition{Type: view.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied"}
	switch {
	case len(findings) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, conditionReasons[findings[0].reason]
		c.Message = strings.TrimPrefix(strings.ReplaceAll(noteLines(findings, true), "\n", "; "), "; ") + "." + strings.ReplaceAll(fixLines(t, findings), "\n", " ")
	case t.LoadBalancerID == "":
		c.Status, c.Reason = metav1.ConditionFalse, "LoadBalancerPending"
		c.Message = "the CCM has not made this Service's Load Balancer yet"
	case len(t.Addresses) == 0 && len(t.BringYourOwn) == ids:
		c.Status, c.Reason = metav1.ConditionUnknown, "BringYourOwn"
		c.Message = "the IPAM IPs were brought with " + request.AnnotationIPAMIDs + ": not in this cluster's listing, their attachment is not watched"
	default:
		c.Message = "attached to Load Balancer " + t.LoadBalancerID
		if t.StatusListsPrivateIPs {
			c.Message += " and listed in status.loadBalancer.ingress"
		}
	}
	return c
}
