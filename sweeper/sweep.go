package sweeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// Report is what one cycle saw and did.
type Report struct {
	Scanned    int
	Referenced int
	Orphaned   int // unreferenced after the cycle
	Tagged     int // orphaned-since set
	Untagged   int // orphaned-since cleared
	Backfilled int // uid tag written
	// Settled counts retained IPs whose ledger was rewritten: the release
	// time (release-at) it lacked, an older version's or a stale one (see
	// ipam.Retention.Settle), one following the pool file's retention
	// (Follow), or the namespace tag.
	Settled int
	// LedgerDeferred counts the IPs whose ledger-only write (a release
	// time, the namespace tag) was left to a later cycle (see
	// MaxLedgerWritesPerCycle).
	LedgerDeferred int
	Released       []string
	// EarlyReleased counts, by pool, the released reservations whose release
	// a full pool had brought forward (release-at).
	EarlyReleased map[string]int
	// NextRelease is the earliest release-at after the cycle started:
	// Start runs a cycle then rather than up to an Interval later, as an
	// admission that brought it forward told its client to retry by then.
	// Never a past time: the loop wakes for the future only.
	NextRelease  time.Time
	WouldRelease []string // report-only, or over the cap
	Shared       int      // IPs referenced by more than one Service
	Unreserved   int      // live Services that should hold a reservation and do not
	Claims       int      // bring-your-own claims collected
	// OutOfScope are this cluster's tagged IPs outside every pool's subnet:
	// another cluster may share the name, so they are left alone.
	OutOfScope int
	// Stranded are this cluster's reservations no live Service references
	// that have stayed attached to a Load Balancer past the convergence
	// grace: the CCM did not let go of them (a Load Balancer left behind
	// by a Service that is gone, or a move it never detached). The sweeper
	// never releases an attached IP: someone must delete that Load
	// Balancer or detach the IP.
	Stranded int
	Errors   int
	// NotConverged counts, by reason, the live Services whose reserved IPs
	// are not applied past the convergence grace (each reason once per
	// Service); every reason is present.
	NotConverged map[string]int
	// View is what the cycle wrote of the view (Options.View).
	View view.Writes
}

// liveRef is a live Service referencing an IP: what an Event on the
// Service and the report of a shared IP name.
type liveRef struct {
	key             types.NamespacedName
	uid             types.UID
	resourceVersion string
	// judged is the namespace the Service is judged by
	// (request.JudgedNamespace): its ledger's namespace tag. Empty where
	// only the Event's reference is needed.
	judged string
	// loadBalancerID is the Service's Load Balancer (ccm.LoadBalancerID);
	// externallyManaged, its user names it (ccm.ExternallyManaged).
	loadBalancerID    string
	externallyManaged bool
}

func refOf(svc *servicecache.Record) liveRef {
	return liveRef{key: svc.Key(), uid: svc.UID, resourceVersion: svc.ResourceVersion,
		loadBalancerID: svc.LoadBalancerID(), externallyManaged: ccm.ExternallyManaged(svc.Annotation)}
}

// judgedRef is refOf with the namespace svc is judged by under cfg.
func judgedRef(cfg *ipam.Config, svc *servicecache.Record) liveRef {
	r := refOf(svc)
	r.judged = request.JudgedNamespace(cfg, svc.Namespace, svc.Label)
	return r
}

// object is the Service as an Event's reference names it.
func (r liveRef) object() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name, UID: r.uid, ResourceVersion: r.resourceVersion}}
}

// liveView is the cycle's view of the live Services that reference IPAM
// IDs: each Service once, as the cache holds it, and by ID the indices of
// those that reference it. The cycle keeps it through the listing of the
// reservations, so it holds no copy of what the Services say: with the
// informer's store (see services) it costs a pointer, the IDs' slice and a
// map entry per Service.
type liveView struct {
	services []watched
	byID     map[string][]int32
}

// refs are the live Services referencing id, judged under cfg.
func (v *liveView) refs(cfg *ipam.Config, id string) []liveRef {
	idx := v.byID[id]
	if len(idx) == 0 {
		return nil
	}
	out := make([]liveRef, len(idx))
	for i, j := range idx {
		out[i] = judgedRef(cfg, v.services[j].svc)
	}
	return out
}

// key is the view's own copy of a referenced id (a part of a cached
// annotation), so that a map keyed by it does not keep the listing's
// string; ok is false when no live Service references id.
func (v *liveView) key(id string) (string, bool) {
	idx := v.byID[id]
	if len(idx) == 0 {
		return "", false
	}
	for _, own := range v.services[idx[0]].ids {
		if own == id {
			return own, true
		}
	}
	return id, true
}

// ErrNotSynced is returned by Sweep while the Service cache is not synced.
var ErrNotSynced = errors.New("the Service cache has not synced; nothing is done until it has")

// Sweep runs one cycle: list this cluster's reservations, compare with the
// IDs live Services reference, keep the ledger tags current, and release
// what has been unreferenced past its retention and is attached to nothing.
//
// Releases are decided with the clock read when the cycle starts, before
// the live view is taken: the earliest reading, so the release protocol's
// margin (ipam.Retention) holds however long the listing takes.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The cycle's garbage is ~3.7 KB per listed IP, and at GOGC=100 the heap
	// goal doubles the cached Services: a lower goal for the cycle only.
	defer lowerGC()()
	var rep Report
	start := s.o.Clock.Now()
	defer func() {
		if s.o.Metrics != nil {
			s.o.Metrics.observeCycle(s.o.Clock.Since(start), rep)
		}
	}()
	if !s.o.Synced() {
		rep.Errors++
		return rep, ErrNotSynced
	}
	cfg := s.o.Config()
	live, deleting, err := s.liveReferences(ctx, &rep)
	if err != nil {
		rep.Errors++
		return rep, err
	}
	claimed := s.collectClaims(ctx, live, deleting, &rep)
	// The live view is taken before the listing: an IP booked in between
	// is at worst tagged orphaned for a cycle, never released, since any
	// retention is longer than a cycle.
	c := cycle{s: s, rep: &rep, cfg: cfg, start: start, view: live, scope: poolSubnets(cfg), orphansByPool: map[string]int{},
		listed: make(map[string]attachment, len(live.byID)), strandedIDs: map[string]bool{}}
	// Page by page: the cycle never holds the whole listing. Releases wait
	// for its end, as they would shift the pages still to come.
	err = scaleway.EachPage(ctx, s.o.Cloud, scaleway.ListFilter{Tags: []string{ipam.TagCluster + cfg.ClusterName}}, func(page []*scaleway.IP) error {
		for _, ip := range page {
			c.judge(ctx, ipam.Read(ip, start))
		}
		return nil
	})
	if err != nil {
		rep.Errors++
		return rep, fmt.Errorf("listing this cluster's reservations: %w", err)
	}
	for _, ip := range c.releases {
		c.release(ctx, ip)
	}
	s.stranded = c.strandedIDs
	if rep.OutOfScope > 0 {
		s.o.Log.Info("IPs tagged with this cluster's name lie outside every pool's subnet and are left alone: another cluster with the same clusterName, or the network of a removed pool (--release-removed-pools releases those)", "count", rep.OutOfScope, "clusterName", cfg.ClusterName)
	}
	s.monitor(ctx, live.services, c.listed, claimed, s.o.Clock.Now(), &rep)
	if s.o.View != nil {
		c.publish(ctx, claimed)
	}
	if s.o.Metrics != nil {
		s.o.Metrics.setCycle(c.orphansByPool, rep)
	}
	return rep, nil
}

// liveReferences maps IPAM IDs to the live LoadBalancer Services using them,
// and reports the live ones that should hold a reservation and do not.
// deleting maps IDs to the Terminating Services that still name them (the
// CCM's finalizer holds them while it tears their Load Balancer down).
func (s *Sweeper) liveReferences(ctx context.Context, rep *Report) (view *liveView, deleting map[string][]types.NamespacedName, err error) {
	services, err := s.services(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Sized once: grown by appends, the views of 100,000 Services would
	// leave about four times their size behind as garbage.
	view = &liveView{services: make([]watched, 0, len(services)), byID: make(map[string][]int32, len(services))}
	deleting = map[string][]types.NamespacedName{}
	seen := map[types.UID]bool{}
	for _, svc := range services {
		if !svc.Live() {
			if svc.Deleting() {
				for _, id := range svc.ReferencedIDs() {
					deleting[id] = append(deleting[id], svc.Key())
				}
			}
			continue
		}
		ids := svc.ReferencedIDs()
		if len(ids) > 0 {
			for _, id := range ids {
				view.byID[id] = append(view.byID[id], int32(len(view.services)))
			}
			view.services = append(view.services, watched{svc: svc, ids: ids})
		}
		if len(ids) == 0 && s.o.Namespaces != nil {
			s.reportUnreserved(ctx, svc, seen, rep)
		}
	}
	for uid := range s.reported {
		if !seen[uid] {
			delete(s.reported, uid)
		}
	}
	return view, deleting, nil
}

// services are the Records of the informer's store, in place: the cycle
// reads every Service of the cluster at once, and copying them all each
// cycle would double what the informer holds. The Records are the
// informer's, so nothing here writes to them (the cycle, Unreserved and the
// Events only read). The informer replaces a changed Service's Record
// rather than writing to it, so the cycle's view stays the one it took.
// Without the store, Services are listed and made Records.
func (s *Sweeper) services(ctx context.Context) ([]*servicecache.Record, error) {
	if s.o.ServiceStore != nil {
		objs := s.o.ServiceStore.List()
		out := make([]*servicecache.Record, 0, len(objs))
		for _, obj := range objs {
			if svc, ok := obj.(*servicecache.Record); ok {
				out = append(out, svc)
			}
		}
		return out, nil
	}
	var list corev1.ServiceList
	if err := s.o.Services.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	out := make([]*servicecache.Record, len(list.Items))
	for i := range list.Items {
		out[i] = servicecache.NewRecord(&list.Items[i])
	}
	return out, nil
}

// record reads the Record of one Service, as services does; ok is false
// when the Service does not exist.
func (s *Sweeper) record(ctx context.Context, key types.NamespacedName) (rec *servicecache.Record, ok bool, err error) {
	if s.o.ServiceStore != nil {
		obj, ok, err := s.o.ServiceStore.GetByKey(key.String())
		rec, isRecord := obj.(*servicecache.Record)
		return rec, ok && isRecord, err
	}
	var svc corev1.Service
	if err := s.o.Services.Get(ctx, key, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return servicecache.NewRecord(&svc), true, nil
}

// reportUnreserved counts a live Service that should hold a reservation and
// does not, with one Event per Service.
func (s *Sweeper) reportUnreserved(ctx context.Context, svc *servicecache.Record, seen map[types.UID]bool, rep *Report) {
	want, what, err := request.Unreserved(ctx, s.o.Config(), s.o.Namespaces, s.o.Excluded, svc)
	if err != nil {
		s.o.Log.V(1).Info("cannot tell whether a Service should hold a reservation", "service", svc.Key(), "error", err.Error())
		return
	}
	if !want {
		return
	}
	rep.Unreserved++
	seen[svc.UID] = true
	if s.reported[svc.UID] {
		return
	}
	s.reported[svc.UID] = true
	s.event(svc.Regarding(), corev1.EventTypeWarning, EventReasonIPNotReserved,
		"this Service asks for %s but carries no %s: it was admitted without scw-lb-ipam (failurePolicy Ignore while the webhook was unavailable, or created before its namespace opted in), so its Load Balancer keeps a DHCP address. To move it to a reserved IP, set %s: \"true\" (the CCM re-attaches the Load Balancer: a brief outage)",
		what, ccm.AnnotationPrivateIPIDs, request.AnnotationAllowIPChange)
}

// collectClaims deletes bring-your-own claims whose Service no longer uses
// the ID, so that the ID may serve another Service. A claim is kept while
// its Service exists, Terminating included, and while its IP is still
// attached to a Load Balancer: Scaleway deletes the previous incarnation's
// Load Balancer up to a minute after the CCM let the Service go, and a
// re-create in that window must find its claim (one GetIP per claim about
// to be collected, which is rare). It returns the IDs the claims named, nil
// when they could not be read.
func (s *Sweeper) collectClaims(ctx context.Context, view *liveView, deleting map[string][]types.NamespacedName, rep *Report) map[string]bool {
	if s.o.Claims == nil {
		return map[string]bool{}
	}
	n, ids, err := s.o.Claims.Collect(ctx, func(id string, svc types.NamespacedName) bool {
		for _, j := range view.byID[id] {
			if view.services[j].svc.Key() == svc {
				return true
			}
		}
		if slices.Contains(deleting[id], svc) {
			return true
		}
		ip, err := s.o.Cloud.GetIP(ctx, id)
		switch {
		case scaleway.Classify(err) == scaleway.KindNotFound:
			return false
		case err != nil:
			s.o.Log.V(1).Info("cannot tell whether a claimed IP is still attached; the claim is kept", "ipamID", id, "error", err.Error())
			return true
		}
		return ip.Resource != nil && ip.Resource.Type == scaleway.ResourceLoadBalancer
	})
	rep.Claims += n
	if err != nil {
		rep.Errors++
		s.o.Log.Error(err, "collecting bring-your-own claims")
		return nil
	}
	claimed := make(map[string]bool, len(ids))
	for _, id := range ids {
		claimed[id] = true
	}
	return claimed
}
