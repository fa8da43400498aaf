package chaos

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

type result struct {
	n      int
	ok     bool
	detail string
}

// ending is what the checks read once the run is over: the violations
// recorded while it ran, and the state it left.
type ending struct {
	settled  bool
	logs     string
	addrs    *liveAddresses
	sticky   *stickiness
	seen     []violation
	returned map[string]string // IPAM ID → Service that got it
	services []corev1.Service
}

// during are the violations of invariant n recorded while the run went on.
func (e *ending) during(n int) []string {
	var out []string
	for _, v := range e.seen {
		if v.n == n {
			out = append(out, v.msg)
		}
	}
	return out
}

// invariant is one of the design's invariants: its number and the check
// that lists its breaches (none when it holds).
type invariant struct {
	n     int
	check func(*run, *ending) []string
}

// invariantChecks are the eight invariants, in the design's order.
var invariantChecks = []invariant{
	{1, (*run).oneServiceAnID},
	{2, (*run).noLiveIDReleased},
	{3, (*run).nothingOursUnreferenced},
	{4, (*run).everyIDBooked},
	{5, (*run).optedOutUntouched},
	{6, (*run).secretNowhere},
	{7, func(_ *run, e *ending) []string { return append(e.during(7), e.addrs.violations...) }},
	{8, func(_ *run, e *ending) []string { return append(e.during(8), e.sticky.violations()...) }},
}

func (r *run) invariants(settled bool, logs string, addrs *liveAddresses, sticky *stickiness) []result {
	r.mu.Lock()
	e := &ending{settled: settled, logs: logs, addrs: addrs, sticky: sticky, seen: slices.Clone(r.violations), returned: maps.Clone(r.returned)}
	r.mu.Unlock()
	var list corev1.ServiceList
	_ = r.env.Kube.List(context.Background(), &list)
	e.services = list.Items
	res := make([]result, 0, len(invariantChecks))
	for _, inv := range invariantChecks {
		bad := inv.check(r, e)
		res = append(res, result{n: inv.n, ok: len(bad) == 0, detail: strings.Join(bad, "; ")})
	}
	return res
}

// ours are the live Services of the namespaces the webhook serves.
func (e *ending) ours() []*corev1.Service {
	var out []*corev1.Service
	for i := range e.services {
		svc := &e.services[i]
		if ccm.Live(svc) && svc.Namespace != "plain" && svc.Namespace != "kube-system" {
			out = append(out, svc)
		}
	}
	return out
}

// oneServiceAnID (1): sampled during the run, and once more at the end.
func (r *run) oneServiceAnID(e *ending) []string {
	bad := e.during(1)
	owners := map[string][]string{}
	for _, svc := range e.ours() {
		for _, id := range ccm.ReferencedIDs(svc) {
			owners[id] = append(owners[id], svc.Namespace+"/"+svc.Name)
		}
	}
	for id, o := range owners {
		if len(o) > 1 {
			bad = append(bad, fmt.Sprintf("%s referenced by %v", id, o))
		}
	}
	return bad
}

// noLiveIDReleased (2): sampled during the run, and once more at the end.
func (r *run) noLiveIDReleased(e *ending) []string {
	bad := e.during(2)
	for _, svc := range e.ours() {
		for _, id := range ccm.ReferencedIDs(svc) {
			if _, ok := r.env.Emu.IP(id); !ok {
				bad = append(bad, fmt.Sprintf("IP %s of live Service %s/%s is released", id, svc.Namespace, svc.Name))
			}
		}
	}
	return bad
}

// nothingOursUnreferenced (3): after quiescence and retention, nothing of
// ours unreferenced, but what the CCM's own log shows it left attached to
// a Load Balancer it let go (counted apart, in the report).
func (r *run) nothingOursUnreferenced(e *ending) []string {
	left := r.leftovers()
	r.mu.Lock()
	r.byCCM = left.byCCM
	r.mu.Unlock()
	if e.settled {
		return nil
	}
	return left.unexplained
}

// everyIDBooked (4): every ID handed out was booked (audit) or is a
// brought-your-own one.
func (r *run) everyIDBooked(e *ending) []string {
	booked := map[string]bool{}
	for _, ev := range r.env.Emu.Audit() {
		if ev.Kind == emulator.AuditBook {
			booked[ev.IPID] = true
		}
	}
	for _, id := range r.byo {
		booked[id] = true
	}
	var bad []string
	for id, svc := range e.returned {
		if !booked[id] {
			bad = append(bad, fmt.Sprintf("%s handed to %s was never booked", id, svc))
		}
	}
	return bad
}

// optedOutUntouched (5): opted-out and excluded namespaces never modified.
func (r *run) optedOutUntouched(e *ending) []string {
	bad := e.during(5)
	for i := range e.services {
		svc := &e.services[i]
		if svc.Namespace == "plain" || svc.Namespace == "kube-system" {
			for _, k := range []string{ccm.AnnotationPNIDs, request.AnnotationAddresses} {
				if _, ok := svc.Annotations[k]; ok {
					bad = append(bad, fmt.Sprintf("%s/%s has %s", svc.Namespace, svc.Name, k))
				}
			}
		}
	}
	return bad
}

// secretNowhere (6): the secret key in no log, event, warning or metric.
func (r *run) secretNowhere(e *ending) []string {
	haystacks := append([]string{e.logs}, r.warnings.List()...)
	var events eventsv1.EventList
	_ = r.env.Kube.List(context.Background(), &events)
	var coreEvents corev1.EventList
	_ = r.env.Kube.List(context.Background(), &coreEvents)
	for _, ev := range events.Items {
		haystacks = append(haystacks, ev.Note, ev.Reason)
	}
	for _, ev := range coreEvents.Items {
		haystacks = append(haystacks, ev.Message, ev.Reason)
	}
	var metricsText bytes.Buffer
	for _, f := range r.env.Gather() {
		_, _ = expfmt.MetricFamilyToText(&metricsText, f)
	}
	haystacks = append(haystacks, metricsText.String())
	var bad []string
	// The owner's key (the CCM's) and the webhook's, before and after
	// the rotation.
	secrets := []string{testenv.SecretKey, testenv.WebhookKey(1).SecretKey, testenv.WebhookKey(2).SecretKey}
	for _, h := range haystacks {
		if slices.ContainsFunc(secrets, func(s string) bool { return strings.Contains(h, s) }) {
			bad = append(bad, "found in: "+truncate(h, 120))
		}
	}
	if len(e.logs) == 0 || metricsText.Len() == 0 {
		bad = append(bad, "nothing was scanned")
	}
	return bad
}
