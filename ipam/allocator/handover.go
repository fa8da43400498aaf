package allocator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

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
func Handover(ctx context.Context, cloud scaleway.Cloud, cfg *ipam.Config, policy ipam.Retention, req ipam.HandoverRequest) ([]ipam.Handed, error) {
	if req.From == cfg.ClusterName {
		return nil, fmt.Errorf("handing over from cluster %q to itself: --from must name another cluster", req.From)
	}
	if req.Now == nil {
		req.Now = time.Now
	}
	var out []ipam.Handed
	var seen []string
	for _, p := range cfg.Pools {
		if slices.Contains(seen, p.PrivateNetworkID) {
			continue
		}
		seen = append(seen, p.PrivateNetworkID)
		ips, err := cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: p.PrivateNetworkID, Tags: []string{ipam.TagCluster + req.From}, OldestFirst: true})
		if err != nil {
			return out, fmt.Errorf("listing the reservations of cluster %s on Private Network %s: %w", req.From, p.PrivateNetworkID, err)
		}
		// Undated: the run judges with the clock read right before each
		// write, never from when it read.
		for _, ip := range ipam.ReadAll(ips, time.Time{}) {
			h, pool, ok := ipam.HandoverCandidate(cfg, policy, req, ip)
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

// handOver re-reads ip and re-tags it to cluster, unless its tags changed
// since the listing or its release came within the margin meanwhile.
func handOver(ctx context.Context, cloud scaleway.Cloud, cluster string, policy ipam.Retention, pool *ipam.Pool, ip *ipam.Reservation, h *ipam.Handed, clock func() time.Time) error {
	got, err := cloud.GetIP(ctx, ip.ID)
	switch {
	case scaleway.Classify(err) == scaleway.KindNotFound:
		h.Skipped = "released since the listing"
		return nil
	case err != nil:
		return fmt.Errorf("re-reading IPAM IP %s (%s) before handing it over: %w", ip.ID, ip.Address, err)
	case !ipam.SameTags(got.Tags, ip.IP.Tags):
		h.Skipped = "its tags changed since the listing (taken back or being released)"
		return nil
	}
	e := ipam.Read(got, time.Time{}).Entry
	// Judged again with the clock read after the re-read: the listing may
	// be minutes old.
	now := clock()
	if h.Skipped = ipam.HandoverSkip(policy, pool, e, e.Cluster, now); h.Skipped != "" {
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
