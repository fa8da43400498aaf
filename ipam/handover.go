package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// HandoverRequest moves another cluster's retained reservations to the
// cluster of a pool file at once (a cluster migration): what a CREATE in a
// pool with adoptFrom does for one Service, for every Service that is gone.
type HandoverRequest struct {
	// From is the cluster whose reservations move; the pool file's
	// clusterName receives them.
	From string
	// Namespace, when set, moves that namespace's reservations only.
	Namespace string
	DryRun    bool
	// Now reads the clock (time.Now when nil). A run can last minutes: it
	// is read again right before each write, which judges the release time
	// and starts the receiving cluster's retention.
	Now func() time.Time
}

// Handed is one reservation handed over (or that would be, or was left).
type Handed struct {
	ID      string
	Address netip.Addr
	Service types.NamespacedName
	Pool    string
	// Skipped says why it was left after all; empty when it moved.
	Skipped string
}

// Handover re-tags to cfg's cluster the retained reservations of cluster
// From on the pools' networks and inside their address spaces whose
// release-at (From's own, as its ledger says) is more than the margin
// away: From's sweeper may be releasing the others right now, and one
// without release-at (an older version's) has no time this cluster can
// judge. Each is re-read right before its write, judged again at that
// moment, and left when its tags changed since the listing (From's
// sweeper or admissions acted on it); From's sweeper re-reads the tags
// before any release, so it never releases a moved one. A moved
// reservation keeps its Service and uid, takes the pool's name, and is
// retained from the moment of its write with this cluster's release-at: a
// fresh retention window here. Reservations of other clusters are never
// read into a write.
func Handover(ctx context.Context, cloud scaleway.Cloud, cfg *Config, policy Retention, req HandoverRequest) ([]Handed, error) {
	if req.From == cfg.ClusterName {
		return nil, fmt.Errorf("handing over from cluster %q to itself: --from must name another cluster", req.From)
	}
	if req.Now == nil {
		req.Now = time.Now
	}
	var out []Handed
	var seen []string
	for _, p := range cfg.Pools {
		if slices.Contains(seen, p.PrivateNetworkID) {
			continue
		}
		seen = append(seen, p.PrivateNetworkID)
		ips, err := cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: p.PrivateNetworkID, Tags: []string{TagCluster + req.From}, OldestFirst: true})
		if err != nil {
			return out, fmt.Errorf("listing the reservations of cluster %s on Private Network %s: %w", req.From, p.PrivateNetworkID, err)
		}
		for _, ip := range ips {
			h, pool, ok := handoverCandidate(cfg, policy, req, ip)
			if !ok {
				continue
			}
			if !req.DryRun && h.Skipped == "" {
				if err := handOver(ctx, cloud, cfg.ClusterName, policy, pool, ip, &h, req.Now); err != nil {
					return out, err
				}
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// handoverCandidate reports whether ip is one of From's retained
// reservations in a pool, and in which; one whose release is too close to
// move, or unknown, is reported skipped.
func handoverCandidate(cfg *Config, policy Retention, req HandoverRequest, ip *scaleway.IP) (Handed, *Pool, bool) {
	e, ok := ParseEntry(ip.Tags)
	// The tag filter is a hint: the ledger decides.
	if !ok || !e.Owns(req.From) || e.OrphanedSince.IsZero() || (req.Namespace != "" && e.Service.Namespace != req.Namespace) {
		return Handed{}, nil, false
	}
	i := slices.IndexFunc(cfg.Pools, func(p *Pool) bool { return p.Holds(ip.SubnetID, ip.Address) })
	if i < 0 {
		return Handed{}, nil, false
	}
	h := Handed{ID: ip.ID, Address: ip.Address, Service: e.Service, Pool: cfg.Pools[i].Name}
	h.Skipped = handoverSkip(policy, cfg.Pools[i], e, req.From, req.Now())
	return h, cfg.Pools[i], true
}

// handoverSkip says why a retained reservation of cluster from may not
// move at now; empty when it may.
func handoverSkip(policy Retention, p *Pool, e Entry, from string, now time.Time) string {
	switch {
	case policy.Adoptable(p, e, now):
		return ""
	case e.ReleaseAt.IsZero():
		return "cluster " + from + " retains it without a release time (an older scw-lb-ipam there): upgrade it, or wait for its sweeper to write one"
	case e.ReleaseAt.Before(e.OrphanedSince):
		return "its release time is stale (before it was retained); cluster " + from + "'s sweeper rewrites it"
	}
	return "its release by cluster " + from + " is due within the safety margin"
}

// handOver re-reads ip and re-tags it to cluster, unless its tags changed
// since the listing or its release came within the margin meanwhile.
func handOver(ctx context.Context, cloud scaleway.Cloud, cluster string, policy Retention, pool *Pool, ip *scaleway.IP, h *Handed, clock func() time.Time) error {
	fresh, err := cloud.GetIP(ctx, ip.ID)
	switch {
	case scaleway.Classify(err) == scaleway.KindNotFound:
		h.Skipped = "released since the listing"
		return nil
	case err != nil:
		return fmt.Errorf("re-reading IPAM IP %s (%s) before handing it over: %w", ip.ID, ip.Address, err)
	case !SameTags(fresh.Tags, ip.Tags):
		h.Skipped = "its tags changed since the listing (taken back or being released)"
		return nil
	}
	e, _ := ParseEntry(fresh.Tags)
	// Judged again with the clock read after the re-read: the listing may
	// be minutes old.
	now := clock()
	if h.Skipped = handoverSkip(policy, pool, e, e.Cluster, now); h.Skipped != "" {
		return nil
	}
	// A fresh retention window, this cluster's: a release the other
	// cluster's full pool brought forward goes with the move.
	e.Cluster, e.Pool = cluster, h.Pool
	e = policy.Start(pool, e, now)
	if _, err := cloud.SetTags(ctx, ip.ID, e.Tags()); err != nil {
		if scaleway.Classify(err) == scaleway.KindNotFound {
			h.Skipped = "released since the re-read"
			return nil
		}
		return fmt.Errorf("re-tagging IPAM IP %s (%s) to cluster %s: %w", ip.ID, ip.Address, cluster, err)
	}
	return nil
}
