package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// leftovers are this cluster's IPs no live Service references, split by
// who is to blame: the CCM, when its own log shows it let a Service go
// while the Load Balancer holding the IP stayed (the product cannot
// release an attached IP, and reports it as stranded), or else the
// product (invariant 3).
type leftovers struct {
	unexplained []string
	byCCM       []string
}

// leftovers lists this cluster's IPs no live Service references.
func (r *run) leftovers() leftovers {
	var out leftovers
	var list corev1.ServiceList
	if err := r.env.Kube.List(context.Background(), &list); err != nil {
		out.unexplained = []string{"cannot list Services: " + err.Error()}
		return out
	}
	refs := map[string]bool{}
	for i := range list.Items {
		if ccm.Live(&list.Items[i]) {
			for _, id := range ccm.ReferencedIDs(&list.Items[i]) {
				refs[id] = true
			}
		}
	}
	lbs, audit := r.env.Emu.LBs(), r.env.Emu.Audit()
	r.mu.Lock()
	journal := slices.Clone(r.journal)
	r.mu.Unlock()
	for _, ip := range r.env.Emu.IPs() {
		e, ok := ipam.ParseEntry(ip.Tags)
		if !ok || !e.Owns("chaos") || refs[ip.ID] {
			continue
		}
		resource := ""
		if ip.Resource != nil {
			resource = ip.Resource.ID
		}
		text := fmt.Sprintf("%s (%s, service %s, attached %v%s; %s)", ip.ID, ip.Address, e.Service, ip.Resource != nil, holderOf(resource, list.Items, lbs), trail(audit, ip.ID))
		if said := ccmLetGo(r.env.CCM.Lines, resource, lbs, list.Items, journal, audit); said != "" {
			out.byCCM = append(out.byCCM, text+"; the CCM's log: "+said)
			continue
		}
		out.unexplained = append(out.unexplained, text)
	}
	return out
}

// ccmLetGo is the CCM's account, from its own log, of letting the Service
// of Load Balancer lbID go while that Load Balancer stays: its service
// controller's "Removing finalizer from service NS/NAME" during that
// Service's life (from the Load Balancer's creation to the next Service
// of that name), with no DeleteLB of it in the emulator's audit, and the
// line that says why when there is one (its lookup found none, or it took
// the Load Balancer for renamed). "" when the log shows no such thing, or
// the Service still lives.
func ccmLetGo(lines func(string) []string, lbID string, lbs []emulator.LB, services []corev1.Service, journal []journalEntry, audit []emulator.AuditEvent) string {
	var lb *emulator.LB
	for i := range lbs {
		if lbs[i].ID == lbID {
			lb = &lbs[i]
		}
	}
	if lb == nil {
		return ""
	}
	uid := strings.TrimPrefix(lb.Name, testenv.CCMPrefix)
	for i := range services {
		if string(services[i].UID) == uid {
			return ""
		}
	}
	var created time.Time
	for _, ev := range audit {
		switch {
		case ev.LBID != lbID:
		case ev.Kind == emulator.AuditCreateLB:
			created = ev.Time
		case ev.Kind == emulator.AuditDeleteLB:
			return "" // the CCM deleted it
		}
	}
	name, end := lifeOf(journal, uid)
	if created.IsZero() || name == "" {
		return ""
	}
	within := func(want string) string {
		for _, line := range lines(want) {
			if at, ok := klogTime(line, created); ok && !at.Before(created) && (end.IsZero() || at.Before(end)) && strings.HasSuffix(strings.TrimSpace(line), want) {
				return line
			}
		}
		return ""
	}
	removed := within("Removing finalizer from service " + name)
	if removed == "" {
		return ""
	}
	for _, why := range []string{"no loadbalancer matching the name " + lb.Name, "no load balancer found for service " + name,
		"load balancer for service " + name + " was renamed, not removing"} {
		if line := within(why); line != "" {
			return line + "; " + removed
		}
	}
	return removed
}

// lifeOf is the Service (NS/NAME) of UID uid in the run's journal, and
// when its life ended at the latest: the first operation on a Service of
// that name with another UID after it (zero if none).
func lifeOf(journal []journalEntry, uid string) (name string, end time.Time) {
	var seen time.Time
	for _, e := range journal {
		switch {
		case e.uid == uid && name == "":
			name, seen = e.svc, e.start
		case name != "" && e.svc == name && e.uid != "" && e.uid != uid && e.start.After(seen):
			return name, e.start
		}
	}
	return name, time.Time{}
}

// klogTime reads the time of a klog line ("I1128 18:48:02.123456 …"),
// which has no year: the year of near, the run's own time.
func klogTime(line string, near time.Time) (time.Time, bool) {
	if i := strings.IndexAny(line, "IWEF"); i >= 0 {
		line = line[i:]
	}
	if len(line) < len("I0102 15:04:05.000000") {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:len("I0102 15:04:05.000000")], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return t.AddDate(near.Year(), 0, 0), true
}

// holderOf names the Service whose Load Balancer holds ip, if any, and
// what that Service references now.
func holderOf(resource string, services []corev1.Service, lbs []emulator.LB) string {
	if resource == "" {
		return ""
	}
	for _, lb := range lbs {
		if lb.ID != resource {
			continue
		}
		for i := range services {
			if testenv.CCMPrefix+string(services[i].UID) == lb.Name {
				svc := &services[i]
				return fmt.Sprintf(" to the LB of %s/%s (terminating %v, references %v, pn-ids %q, pool %q, addresses %q)", svc.Namespace, svc.Name, svc.DeletionTimestamp != nil, ccm.ReferencedIDs(svc), svc.Annotations[ccm.AnnotationPNIDs], svc.Annotations[request.AnnotationPool], svc.Annotations[request.AnnotationAddresses])
			}
		}
		return " to LB " + lb.ID + " of a Service that is gone (" + lb.Name + ")"
	}
	return " to " + resource + ", no LB of that ID"
}

// trail is an IP's audit trail, to tell why it is left over.
func trail(audit []emulator.AuditEvent, id string) string {
	var parts []string
	for _, ev := range audit {
		if ev.IPID != id {
			continue
		}
		p := ev.Time.Format("15:04:05.000") + " " + string(ev.Kind)
		if ev.LBID != "" {
			p += " lb " + ev.LBID
		}
		if ev.Kind == emulator.AuditTags || ev.Kind == emulator.AuditBook {
			if e, ok := ipam.ParseEntry(ev.Tags); ok && (e.UID != "" || !e.OrphanedSince.IsZero()) {
				p += fmt.Sprintf(" (uid %q, orphaned %s)", e.UID, e.OrphanedSince.Format("15:04:05"))
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
