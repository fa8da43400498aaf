package webhook

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// update judges an UPDATE of a Service that already was a LoadBalancer,
// by updateRules; one the rules let allocate is reserved for like a CREATE.
// Whatever it decides, the CCM's Load Balancer ID a replace dropped is put
// back (see droppedLoadBalancerID).
func (m *ServiceMutator) update(ctx context.Context, req admission.Request, cfg *ipam.Config, old, svc *corev1.Service, ns string, ask request.Ask) decision {
	d := m.judgeUpdate(ctx, req, cfg, old, svc, ns, ask)
	if id, dropped := droppedLoadBalancerID(old, svc); dropped {
		d = d.restoring(ccm.AnnotationLoadBalancerID, id, fmt.Sprintf("scw-lb-ipam: annotation %s (the CCM's, naming its Load Balancer %s) is put back: this update replaced the annotations and dropped it; without it the CCM looks its Load Balancer up by name", ccm.AnnotationLoadBalancerID, id))
	}
	return d
}

func (m *ServiceMutator) judgeUpdate(ctx context.Context, req admission.Request, cfg *ipam.Config, old, svc *corev1.Service, ns string, ask request.Ask) decision {
	r := updateRules(cfg, old, svc, ask)
	switch r.verdict {
	case verdictDeny:
		return refusal(r.err)
	case verdictKeep:
		if len(r.kept) == 0 && len(r.dropped) == 0 {
			return decision{result: resultAllowed}
		}
		return decision{result: resultRestored, set: r.kept, unset: r.dropped}
	}
	return m.allocate(ctx, req, cfg, svc, ns, r.ask, ccm.ReferencedIDs(old), r.verdict == verdictKeepDHCP)
}

// droppedLoadBalancerID is the CCM's Load Balancer ID an UPDATE drops that
// the CCM did not: kubectl replace, or Argo CD's Replace=true, sets the
// annotations to the manifest's. The CCM then finds its Load Balancer by
// name (its prefix and the Service's UID), and patches the ID back by the
// Service's name alone; a copy of the Service it read before a delete and
// re-create of that name (a CCM leader that just started, its node
// worker's pass late) writes the previous Load Balancer's ID onto the new
// Service, which then never reaches its own Load Balancer and, deleted,
// leaves it behind ("was renamed, not removing") with its reserved IP. With
// the ID kept the CCM reads the Load Balancer by ID and writes nothing.
//
// A replace is told from the CCM's own removal (a Service being deleted,
// one it no longer serves, or one whose Load Balancer it re-creates) by
// what else went: a replace drops what the admission wrote with it (the
// IDs, the addresses); the CCM's patch removes its ID alone, also when
// another webhook edits the object on the way. A replace of a manifest
// that carries the admission's annotations but not the CCM's is left as it
// is. An externally managed Load Balancer's ID is the user's.
func droppedLoadBalancerID(old, svc *corev1.Service) (string, bool) {
	id := old.Annotations[ccm.AnnotationLoadBalancerID]
	if _, kept := svc.Annotations[ccm.AnnotationLoadBalancerID]; kept || id == "" || svc.DeletionTimestamp != nil {
		return "", false
	}
	if !dropped(old, svc, request.AnnotationAddresses) && !dropped(old, svc, ccm.AnnotationPrivateIPIDs) {
		return "", false
	}
	if ccm.ExternallyManaged(ccm.Of(old.Annotations)) || ccm.ExternallyManaged(ccm.Of(svc.Annotations)) {
		return "", false
	}
	return id, true
}

// restoring is d that also puts annotation key back at v, as it was before
// the UPDATE, and says so in a warning. A refusal or an error writes
// nothing, so it stays as it is.
func (d decision) restoring(key, v, why string) decision {
	switch d.result {
	case resultAllowed, resultSkipped:
		d.result = resultRestored
	case resultRestored, resultPatched, resultKept, resultDryRun:
	default:
		return d
	}
	d.set = maps.Clone(d.set)
	if d.set == nil {
		d.set = map[string]string{}
	}
	d.set[key] = v
	d.notes = append(slices.Clone(d.notes), why)
	return d
}

// dropped reports whether an UPDATE from old to svc removed annotation key.
func dropped(old, svc *corev1.Service, key string) bool {
	_, had := old.Annotations[key]
	_, has := svc.Annotations[key]
	return had && !has
}

// verdict is what the UPDATE rules say of a change.
type verdict int

const (
	// verdictAllocate: reserve for the ruling's ask, like a CREATE.
	verdictAllocate verdict = iota
	// verdictKeepDHCP: the Load Balancer exists with a DHCP address and
	// no reserved IP, and allow-ip-change is not set: it keeps its address.
	verdictKeepDHCP
	// verdictKeep: the reservations stay; the ruling's kept annotations
	// (none, or what a re-apply dropped) are put back.
	verdictKeep
	// verdictDeny: the change is refused with the ruling's err.
	verdictDeny
)

// ruling is the UPDATE rules' answer.
type ruling struct {
	verdict verdict
	// ask is what to allocate for (verdictAllocate, verdictKeepDHCP), its
	// pn-ids without the networks an earlier admission added.
	ask  request.Ask
	kept map[string]string
	// dropped are annotations an earlier admission wrote that no longer
	// hold (verdictKeep): a DNS target the status will not list.
	dropped []string
	err     error
}

// updateRules decide an UPDATE of a Service that already was a
// LoadBalancer, from the old and new objects and the new request alone (a
// pure function; cfg is the pool file): no call, no cache.
func updateRules(cfg *ipam.Config, old, svc *corev1.Service, ask request.Ask) ruling {
	// The old request read as the new one is, other implementations'
	// words translated: a re-apply that keeps them asks for the same.
	ns := request.JudgedNamespace(cfg, old.Namespace, func(k string) string { return old.Labels[k] })
	prev, _, _ := request.Read(cfg, ns, old.Annotations, old.Spec.LoadBalancerIP)
	oldIDs := old.Annotations[ccm.AnnotationPrivateIPIDs]
	newIDs, hasIDs := svc.Annotations[ccm.AnnotationPrivateIPIDs]
	allocate := func(v verdict, next request.Ask) ruling {
		next.PNIDs = userPNs(cfg, old, next.PNIDs)
		return ruling{verdict: v, ask: next}
	}

	if oldIDs == "" && ccm.HasLoadBalancer(old) && !ask.AllowIPChange {
		// The live-LB guard: the CCM would re-attach the Private Network
		// with the new IP, so the Load Balancer's address would change.
		if hasIDs && newIDs != "" {
			return ruling{verdict: verdictDeny, err: fmt.Errorf("adding annotation %s to a Service whose Load Balancer already exists would re-attach it with a new address (a brief outage); set annotation %s: \"true\" to allow it, or remove %s", ccm.AnnotationPrivateIPIDs, request.AnnotationAllowIPChange, ccm.AnnotationPrivateIPIDs)}
		}
		return allocate(verdictKeepDHCP, ask)
	}
	sameIDs := !hasIDs || sets.New(ask.RawIDs...).Equal(sets.New(prev.RawIDs...))
	if ask.Same(prev, prev.Recorded) && sameIDs {
		if oldIDs == "" {
			// Nothing was reserved before (say the pool file had no default
			// then) and no Load Balancer exists yet: allocate if the request
			// now calls for it.
			return allocate(verdictAllocate, ask)
		}
		// A re-apply (kubectl, Helm 4, Argo CD, Flux) resets the fields its
		// manifest declares: pn-ids back to the user's networks, our
		// annotations dropped or rewritten. Put back what the CCM needs to
		// leave the Load Balancer as it is.
		if err := request.CheckLoadBalancerIP(svc); err != nil {
			return ruling{verdict: verdictDeny, err: err}
		}
		kept, dropped := keptAnnotations(cfg, old, svc, ask, prev.Recorded)
		if v, ok := kept[ccm.AnnotationPNIDs]; ok {
			if err := request.CheckNetworkLimit(ccm.Items(v), request.PNOrigin(ask.PNIDs)+", then those of the reserved IPs"); err != nil {
				return ruling{verdict: verdictDeny, err: err}
			}
		}
		return ruling{verdict: verdictKeep, kept: kept, dropped: dropped}
	}
	if oldIDs != "" && !ask.AllowIPChange {
		what := describeChange(prev, ask, oldIDs, newIDs)
		return ruling{verdict: verdictDeny, err: fmt.Errorf("%s would move the Service to another IP, and the Load Balancer would be re-attached (a brief outage); set annotation %s: \"true\" to allow it, or revert the change", what, request.AnnotationAllowIPChange)}
	}
	if !ask.Same(prev, prev.Recorded) || !hasIDs {
		return allocate(verdictAllocate, ask)
	}
	// The request is the same but the IDs were edited by hand, with
	// allow-ip-change: the new IDs are brought-your-own, to validate.
	return allocate(verdictAllocate, request.Ask{RawIDs: ask.RawIDs, PNIDs: ask.PNIDs})
}

// userPNs separates the networks a user asked for from those an earlier
// admission added: when pn-ids is still what was written then, the pools'
// networks come off it, so that a Service moving to another pool is not left
// attached to the old pool's network.
func userPNs(cfg *ipam.Config, old *corev1.Service, pnIDs []string) []string {
	if old.Annotations[request.AnnotationAddresses] == "" || strings.Join(pnIDs, ",") != old.Annotations[ccm.AnnotationPNIDs] {
		return pnIDs
	}
	var out []string
	for _, id := range pnIDs {
		pooled := false
		for _, p := range cfg.Pools {
			pooled = pooled || (p.PrivateNetworkID == request.PrivateNetworkID(id) && id != cfg.ClusterPrivateNetworkID)
		}
		if !pooled {
			out = append(out, id)
		}
	}
	return out
}

func describeChange(prev, ask request.Ask, oldIDs, newIDs string) string {
	switch {
	case !sets.New(prev.Pools...).Equal(sets.New(ask.Pools...)):
		return fmt.Sprintf("changing annotation %s from %q to %q", request.AnnotationPool, strings.Join(prev.Pools, ","), strings.Join(ask.Pools, ","))
	case !sets.New(prev.Addresses...).Equal(sets.New(ask.Addresses...)):
		return fmt.Sprintf("changing annotation %s from %q to %q", request.AnnotationAddress, request.JoinAddrs(prev.Addresses), request.JoinAddrs(ask.Addresses))
	case !sets.New(prev.IDs...).Equal(sets.New(ask.IDs...)):
		return fmt.Sprintf("changing annotation %s from %q to %q", request.AnnotationIPAMIDs, strings.Join(prev.IDs, ","), strings.Join(ask.IDs, ","))
	}
	return fmt.Sprintf("changing annotation %s from %q to %q", ccm.AnnotationPrivateIPIDs, oldIDs, newIDs)
}

// keptAnnotations are the annotations an UPDATE that keeps its reservations
// must carry, where the incoming object differs: the IDs and addresses as
// an earlier admission wrote them (canonical: the CCM splits on commas
// only), and pn-ids as the user now sets it plus every reservation's
// Private Network (the CCM detaches the networks pn-ids does not list, and
// with the pool's network the reserved IP), and external-dns's target
// (request.DNSTarget), which is dropped where it no longer holds. Empty
// when nothing differs.
func keptAnnotations(cfg *ipam.Config, old, svc *corev1.Service, ask request.Ask, recorded []netip.Addr) (kept map[string]string, dropped []string) {
	kept = map[string]string{}
	for _, k := range []string{ccm.AnnotationPrivateIPIDs, request.AnnotationAddresses} {
		if v, ok := old.Annotations[k]; ok && svc.Annotations[k] != v {
			kept[k] = v
		}
	}
	pns := request.PNList(ask.PNIDs, ccm.Items(old.Annotations[ccm.AnnotationPNIDs]), reservedPNs(cfg, old, recorded))
	if v := strings.Join(pns, ","); v != "" && svc.Annotations[ccm.AnnotationPNIDs] != v {
		kept[ccm.AnnotationPNIDs] = v
	}
	// external-dns's target, as pn-ids: what an earlier admission wrote,
	// back where an apply dropped it; a target of the user's stays.
	addrs := old.Annotations[request.AnnotationAddresses]
	if t, ok := request.DNSTarget(cfg, svc.Annotations, addrs, addrs); ok {
		switch v, set := svc.Annotations[t.Key]; {
		case t.Value == "" && set:
			dropped = append(dropped, t.Key)
		case t.Value != "" && v != t.Value:
			kept[t.Key] = t.Value
		}
	}
	return kept, dropped
}

// reservedPNs are the Private Networks of the reservations an earlier
// admission wrote on old (recorded, its addresses), read without a
// Scaleway call: the network of the pool whose subnet holds each address.
// Where pools of several networks have that subnet, the one old's pn-ids
// names; where none does (the pool was removed from the file), every item
// of old's pn-ids is kept: dropping the wrong one would detach a reserved
// IP.
func reservedPNs(cfg *ipam.Config, old *corev1.Service, recorded []netip.Addr) []string {
	items := ccm.Items(old.Annotations[ccm.AnnotationPNIDs])
	var out []string
	for _, a := range recorded {
		var candidates []string
		for _, p := range cfg.Pools {
			if p.Prefix().Contains(a) && !slices.Contains(candidates, p.PrivateNetworkID) {
				candidates = append(candidates, p.PrivateNetworkID)
			}
		}
		if len(candidates) > 1 {
			candidates = slices.DeleteFunc(candidates, func(pn string) bool { return !slices.Contains(items, pn) })
		}
		if len(candidates) != 1 {
			return items
		}
		if !slices.Contains(out, candidates[0]) {
			out = append(out, candidates[0])
		}
	}
	return out
}
