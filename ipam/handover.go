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
	// Now is when the move happens: the receiving cluster's retention
	// starts then.
	Now time.Time
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
// release is more than the margin away: From's sweeper may be releasing
// the others right now. Each is re-read right before its write and left
// when its tags changed since the listing (From's sweeper or admissions
// acted on it); From's sweeper re-reads the tags before any release, so it
// never releases a moved one. A moved reservation keeps its Service and
// uid, takes the pool's name, and is retained from req.Now: a fresh
// retention window in this cluster, the pool's (the uid says its Service
// existed). Reservations of other clusters are never read into a write.
func Handover(ctx context.Context, cloud scaleway.Cloud, cfg *Config, policy Retention, req HandoverRequest) ([]Handed, error) {
	if req.From == cfg.ClusterName {
		return nil, fmt.Errorf("handing over from cluster %q to itself: --from must name another cluster", req.From)
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
			h, ok := handoverCandidate(cfg, policy, req, ip)
			if !ok {
				continue
			}
			if !req.DryRun && h.Skipped == "" {
				if err := handOver(ctx, cloud, cfg.ClusterName, ip, &h, req.Now); err != nil {
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
// move is reported skipped.
func handoverCandidate(cfg *Config, policy Retention, req HandoverRequest, ip *scaleway.IP) (Handed, bool) {
	e, ok := ParseEntry(ip.Tags)
	// The tag filter is a hint: the ledger decides.
	if !ok || !e.Owns(req.From) || e.OrphanedSince.IsZero() || (req.Namespace != "" && e.Service.Namespace != req.Namespace) {
		return Handed{}, false
	}
	i := slices.IndexFunc(cfg.Pools, func(p *Pool) bool { return p.Holds(ip.SubnetID, ip.Address) })
	if i < 0 {
		return Handed{}, false
	}
	h := Handed{ID: ip.ID, Address: ip.Address, Service: e.Service, Pool: cfg.Pools[i].Name}
	if !policy.Reusable(cfg.Pools[i], e, req.Now) {
		h.Skipped = "its release by cluster " + req.From + " is due within the safety margin"
	}
	return h, true
}

// handOver re-reads ip and re-tags it to cluster, unless its tags changed
// since the listing.
func handOver(ctx context.Context, cloud scaleway.Cloud, cluster string, ip *scaleway.IP, h *Handed, now time.Time) error {
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
	// A fresh retention window: a release the other cluster's full pool
	// brought forward goes with the move.
	e.Cluster, e.Pool, e.OrphanedSince, e.ReleaseAt = cluster, h.Pool, now, time.Time{}
	if _, err := cloud.SetTags(ctx, ip.ID, e.Tags()); err != nil {
		return fmt.Errorf("re-tagging IPAM IP %s (%s) to cluster %s: %w", ip.ID, ip.Address, cluster, err)
	}
	return nil
}
