package sweeper

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unique"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// cycle is what one Sweep keeps while it pages through the listing.
type cycle struct {
	s             *Sweeper
	rep           *Report
	cfg           *ipam.Config
	start         time.Time
	view          *liveView
	scope         map[string]bool
	orphansByPool map[string]int
	// listed holds, of every listed IP a live Service references, what the
	// monitor judges: the listing itself is dropped page by page, and a
	// whole reservation (or IP) per live Service would weigh on the cycle's
	// peak.
	listed map[string]attachment
	// releases are due once the listing has ended.
	releases []*ipam.Reservation
	// ledgerWrites counts the writes that only complete the ledger (see
	// budget).
	ledgerWrites int
	// strandedIDs are the IDs this cycle found stranded (Report.Stranded).
	strandedIDs map[string]bool
	// rows are the IPReservations of the view (Options.View), nil without
	// one.
	rows []view.Reservation
}

// attachment is where a listed IP is, what holds it and whose ledger it
// is: all the monitor and the Service's conditions read of it, 56 bytes a
// live Service. It keeps no string of the listing's (a part of one would
// keep its page alive): the pool is interned, the Service of the ledger
// copied, and only where it may differ from the one referencing the IP.
type attachment struct {
	address  netip.Addr
	resource *scaleway.Resource
	pool     unique.Handle[string]
	// bookedFor is the Service the ledger names when it is not the one
	// live Service that references the IP (another Service's, or an IP
	// several reference); nil when it is.
	bookedFor *types.NamespacedName
	// ours is false for an IP of another cluster (the tag filter is OR).
	ours bool
}

// attach is what the monitor keeps of a listed IP, its ledger e, that
// live Services reference: only is true when one does, the ledger's.
func attach(ip *ipam.Reservation, e ipam.Entry, ours, only bool) attachment {
	a := attachment{address: ip.Address, resource: ip.Resource, pool: unique.Make(e.Pool), ours: ours}
	if !only {
		a.bookedFor = &types.NamespacedName{Namespace: strings.Clone(e.Service.Namespace), Name: strings.Clone(e.Service.Name)}
	}
	return a
}

// holds reports whether the ledger of a names svc.
func (a attachment) holds(svc types.NamespacedName) bool {
	return a.bookedFor == nil || *a.bookedFor == svc
}

// judge keeps the ledger of one listed IP current, and notes what the
// monitor and the releases need of it.
func (c *cycle) judge(ctx context.Context, ip *ipam.Reservation) {
	s, rep := c.s, c.rep
	id, referenced := c.view.key(ip.ID)
	entry := ip.Entry
	ours := entry.Owns(c.cfg.ClusterName)
	if referenced {
		// Every listed ID exists, in scope or not: the monitor reads them.
		idx := c.view.byID[ip.ID]
		c.listed[id] = attach(ip, entry, ours, len(idx) == 1 && c.view.services[idx[0]].svc.Key() == entry.Service)
	}
	if !ours {
		return // the tag filter is OR: foreign IPs may come back too
	}
	if !s.inScope(c.scope, ip) {
		// The tag is a name, not a proof: a cluster of the same name on
		// other networks is not ours to tag or release. A removed pool's
		// network is released only when the operator says so.
		rep.OutOfScope++
		return
	}
	rep.Scanned++
	if referenced {
		rep.Referenced++
		refs := c.view.refs(c.cfg, ip.ID)
		s.referenced(ctx, ip, refs, rep, c)
		c.row(ip, liveEntry(entry, refs), view.StateLive)
		return
	}
	rep.Orphaned++
	c.orphansByPool[entry.Pool]++
	due, e := c.unreferenced(ctx, ip)
	if due {
		c.releases = append(c.releases, ip)
	}
	state := view.StateRetained
	switch {
	case Stranded(ip.Resource, e.OrphanedSince, s.o.Clock.Now(), s.o.ConvergenceGrace):
		state = view.StateStranded
	case e.UID == "":
		state = view.StatePending
	}
	c.row(ip, e, state)
}

// referenced clears orphaned-since, back-fills the uid and the namespace
// tag (and corrects one that names another namespace than the one its
// Service is judged by), and reports an IP shared by several Services. c is the cycle whose
// listing showed ip: re-read before writing (see unchanged), and a write
// of the namespace tag alone within its budget; nil for the back-fill of a
// new Service, which read ip itself.
func (s *Sweeper) referenced(ctx context.Context, ip *ipam.Reservation, refs []liveRef, rep *Report, c *cycle) {
	e := ip.Entry
	if len(refs) > 1 {
		rep.Shared++
		for _, r := range refs {
			s.event(r.object(), corev1.EventTypeWarning, EventReasonIPSharedByServices,
				"IPAM IP %s (%s) is referenced by %d Services (%s); each Service needs its own IP, remove it from all but one", ip.ID, ip.Address, len(refs), keys(refs))
		}
	}
	for _, r := range notNamedFor(ip.Resource, refs) {
		s.event(r.object(), corev1.EventTypeWarning, EventReasonLoadBalancerNotNamedForService, notNamedForNote, ip.ID, ip.Address, ip.Resource.ID, ip.Resource.Name, r.uid)
	}
	next := liveEntry(e, refs)
	// The namespace tag is back-filled by any write (Tags writes it).
	ledgerOnly := e.OrphanedSince.IsZero() && next.UID == e.UID
	current := e.Complete() && next.JudgedNamespace() == e.JudgedNamespace()
	if ledgerOnly && (current || c != nil && !c.budget()) {
		return
	}
	if c != nil && !unchanged(ctx, &s.o, ip, rep) {
		return
	}
	if _, err := s.o.Cloud.SetTags(ctx, ip.ID, next.Tags()); err != nil {
		rep.Errors++
		s.o.Log.Error(err, "updating the ledger of a referenced IP", "ipamID", ip.ID)
		return
	}
	if !e.OrphanedSince.IsZero() {
		rep.Untagged++
	}
	if next.UID != e.UID {
		rep.Backfilled++
	}
}

// liveEntry is the ledger of an IP live Services reference: not retained,
// the uid of the Service of the tag (a re-created Service that took its IP
// back has a new one), and the namespace it is judged by.
func liveEntry(e ipam.Entry, refs []liveRef) ipam.Entry {
	next := e
	next.OrphanedSince, next.ReleaseAt, next.Early = time.Time{}, time.Time{}, false
	for _, r := range refs {
		if r.key != e.Service {
			continue
		}
		if r.uid != "" {
			next.UID = string(r.uid)
		}
		if r.judged != "" {
			next.Namespace = r.judged
		}
	}
	return next
}

// unchanged re-reads a listed IP right before the cycle rewrites its
// tags, which replaces them all: a write from a listing that another
// writer has overtaken would undo that write. Another cluster that took
// the IP over (adoptFrom, handover) re-tagged it to itself, and this
// cluster's tags written back would make it this cluster's again, to
// release once retained here; an admission's take-back cleared
// orphaned-since. Either way the next cycle judges the IP from its tags.
func unchanged(ctx context.Context, o *Options, ip *ipam.Reservation, rep *Report) bool {
	fresh, err := o.Cloud.GetIP(ctx, ip.ID)
	switch {
	case scaleway.Classify(err) == scaleway.KindNotFound:
		return false
	case err != nil:
		rep.Errors++
		o.Log.Error(err, "re-reading an IP before updating its ledger", "ipamID", ip.ID)
		return false
	}
	if !ipam.SameTags(fresh.Tags, ip.IP.Tags) {
		o.Log.V(1).Info("its tags changed since the listing; left to the next cycle", "ipamID", ip.ID)
		return false
	}
	return true
}

// unreferenced carries out the rules' verdict on an IP no live Service
// references (ipam.Retention.Judge), and reports whether it is due for
// release (see release) and its ledger as the cycle leaves it.
func (c *cycle) unreferenced(ctx context.Context, ip *ipam.Reservation) (due bool, _ ipam.Entry) {
	s, rep, e := c.s, c.rep, ip.Entry
	log := s.o.Log.WithValues("ipamID", ip.ID, "address", ip.Address.String(), "pool", e.Pool, "service", e.Service.String())
	if !e.OrphanedSince.IsZero() {
		c.stranded(ip, log)
	}
	pool, _ := c.cfg.PoolOf(e, ip.SubnetID, ip.Address)
	// Due or not is decided with the clock read when the cycle started
	// (see Sweep).
	verdict, next := s.policy.Judge(pool, e, ip.Resource != nil, s.o.ReleaseRemovedPools, c.start, s.o.Clock.Now())
	switch verdict {
	case ipam.VerdictStart:
		// The clock right after the re-read: an admission that saw the IP
		// unorphaned read it before now, so its Service exists before the
		// release is due (retention > margin ≥ twice the admission
		// deadline; the tag rounds this up, never down).
		if !unchanged(ctx, &s.o, ip, rep) {
			return false, e
		}
		e = s.policy.Start(pool, e, s.o.Clock.Now())
		if _, err := s.o.Cloud.SetTags(ctx, ip.ID, e.Tags()); err != nil {
			rep.Errors++
			log.Error(err, "tagging an unreferenced IP orphaned")
			return false, ip.Entry
		}
		rep.Tagged++
		c.wake(e.ReleaseAt)
		log.V(1).Info("no live Service references this IP; retention starts", "releaseAt", e.ReleaseAt.Format(time.RFC3339))
	case ipam.VerdictRewrite:
		if c.rewrite(ctx, ip, next, log) {
			e = next
		}
	case ipam.VerdictRetain:
		c.wake(e.ReleaseAt)
	case ipam.VerdictAttached:
		log.V(1).Info("retention is over but the IP is still attached", "resource", ip.Resource.String())
	case ipam.VerdictRemovedPool:
		log.V(1).Info("kept: its pool is no longer in the pool file (allow with --release-removed-pools)")
	case ipam.VerdictRelease:
		if s.o.ReportOnly {
			c.wouldRelease(ip)
			return false, e
		}
		return true, e
	}
	return false, e
}

// stranded reports a retained IP still attached to a Load Balancer past
// the convergence grace (see Report.Stranded). The CCM detaches an IP
// when it deletes the Load Balancer or moves the Service to another one,
// within seconds; one attached long after is one it lost.
func (c *cycle) stranded(ip *ipam.Reservation, log logr.Logger) {
	if !Stranded(ip.Resource, ip.OrphanedSince, c.s.o.Clock.Now(), c.s.o.ConvergenceGrace) {
		return
	}
	c.rep.Stranded++
	c.strandedIDs[ip.ID] = true
	if c.s.stranded[ip.ID] {
		return // logged when it became so
	}
	log.Info("no live Service references this reservation, yet it stays attached to a Load Balancer: the CCM did not delete that Load Balancer or detach the IP; delete the Load Balancer if no Service uses it (the sweeper then releases the IP after its retention)",
		"loadBalancer", ip.Resource.ID, "loadBalancerName", ip.Resource.Name, "orphanedSince", ip.OrphanedSince.Format(time.RFC3339))
}

// Stranded reports whether a reservation no live Service references since
// orphanedSince, attached to resource, is stranded at now: attached to a
// Load Balancer for longer than grace since. The sweeper and status judge
// with it.
func Stranded(resource *scaleway.Resource, orphanedSince, now time.Time, grace time.Duration) bool {
	return resource != nil && resource.Type == scaleway.ResourceLoadBalancer && !orphanedSince.IsZero() && now.Sub(orphanedSince) >= grace
}

// rewrite writes the ledger of a retained IP whose release time is to
// change (see ipam.Retention.Settle and Follow), with the namespace tag,
// within the cycle's budget of such writes. Re-read first, as every
// rewrite of the cycle.
func (c *cycle) rewrite(ctx context.Context, ip *ipam.Reservation, e ipam.Entry, log logr.Logger) (written bool) {
	s, rep := c.s, c.rep
	if !c.budget() || !unchanged(ctx, &s.o, ip, rep) {
		return false
	}
	if _, err := s.o.Cloud.SetTags(ctx, ip.ID, e.Tags()); err != nil {
		rep.Errors++
		log.Error(err, "rewriting the release time of a retained IP")
		return false
	}
	rep.Settled++
	c.wake(e.ReleaseAt)
	log.V(1).Info("the ledger of a retained IP rewritten", "releaseAt", e.ReleaseAt.Format(time.RFC3339))
	return true
}

// budget reports whether the cycle may make one more write that only
// completes the ledger (a release time, the namespace tag), and counts it:
// after an upgrade every reservation lacks one, and a cycle writing them
// all (a re-read and a write each) would hold its releases back and spend
// the API key the webhooks use. The rest waits for the next cycles.
func (c *cycle) budget() bool {
	if c.ledgerWrites >= MaxLedgerWritesPerCycle {
		c.rep.LedgerDeferred++
		return false
	}
	c.ledgerWrites++
	return true
}

// wake notes a release for the loop to wake up for (Report.NextRelease):
// only one after the cycle started. One already due is released by this
// cycle or waits for the next tick (attached, over the cap): a past time
// would wake the loop at once, again and again.
func (c *cycle) wake(at time.Time) {
	if at.After(c.start) && (c.rep.NextRelease.IsZero() || at.Before(c.rep.NextRelease)) {
		c.rep.NextRelease = at
	}
}

// wouldRelease reports an IP due for release that is kept: report-only, or
// over the cap.
func (c *cycle) wouldRelease(ip *ipam.Reservation) {
	c.rep.WouldRelease = append(c.rep.WouldRelease, ip.ID)
	c.s.o.Log.Info("would release", "ipamID", ip.ID, "address", ip.Address.String(), "pool", ip.Pool, "service", ip.Service.String(), "reportOnly", c.s.o.ReportOnly, "capReached", !c.s.o.ReportOnly)
}

// release re-reads an IP whose retention is over right before releasing
// it: an admission that took the IP back has cleared orphaned-since, and
// the CCM may have attached it.
func (c *cycle) release(ctx context.Context, ip *ipam.Reservation) {
	s, rep, e := c.s, c.rep, ip.Entry
	if len(rep.Released) >= s.o.MaxReleasesPerCycle {
		c.wouldRelease(ip)
		return
	}
	log := s.o.Log.WithValues("ipamID", ip.ID, "address", ip.Address.String(), "pool", e.Pool, "service", e.Service.String())
	fresh, err := s.o.Cloud.GetIP(ctx, ip.ID)
	if err != nil {
		if scaleway.Classify(err) != scaleway.KindNotFound {
			rep.Errors++
			log.Error(err, "re-reading an IP before releasing it")
		}
		return
	}
	if !ipam.SameTags(fresh.Tags, ip.IP.Tags) || fresh.Resource != nil {
		log.Info("changed since the cycle began; not released")
		return
	}
	if err := s.o.Cloud.ReleaseIP(ctx, ip.ID); err != nil {
		if scaleway.Classify(err) != scaleway.KindNotFound {
			rep.Errors++
			log.Error(err, "releasing an IP")
		}
		return
	}
	rep.Released = append(rep.Released, ip.ID)
	pool, _ := c.cfg.PoolOf(e, ip.SubnetID, ip.Address)
	retention := s.policy.Of(pool, e)
	if e.Early {
		if rep.EarlyReleased == nil {
			rep.EarlyReleased = map[string]int{}
		}
		rep.EarlyReleased[e.Pool]++
		log.Info("released early: its pool, or its namespace's share, was full", "orphanedSince", e.OrphanedSince.Format(time.RFC3339), "retention", retention.String(), "releaseAt", e.ReleaseAt.Format(time.RFC3339))
		return
	}
	log.Info("released", "orphanedSince", e.OrphanedSince.Format(time.RFC3339), "retention", retention.String())
}

// keys names the Services sorted: the message must not depend on the
// order the informer's store lists them in.
func keys(refs []liveRef) string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.key.String()
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
