package ipam

import (
	"context"
	"errors"
)

// PoolStats is the occupancy of one pool, from the last listing of its
// subnet plus this process's bookings since.
type PoolStats struct {
	Pool string
	// Total is the number of addresses the pool can hand out; 0 when the
	// pool is too wide to count (an IPv6 /64 without ranges).
	Total uint64
	// UsedByCluster are this cluster's reservations, Retained included.
	UsedByCluster uint64
	// UsedByOthers are held by other clusters, resources or people.
	UsedByOthers uint64
	// Retained are this cluster's reservations no Service uses, kept for
	// their retention.
	Retained uint64
	Free     uint64
	// Known is false until the pool's subnet has been listed once.
	Known bool
}

// Stats reports every pool's occupancy without calling the API.
func (a *Allocator) Stats() []PoolStats {
	cfg := a.Config()
	out := make([]PoolStats, 0, len(cfg.Pools))
	for _, p := range cfg.Pools {
		st := PoolStats{Pool: p.Name, Total: p.Total()}
		a.mu.Lock()
		o := a.occ[p.SubnetID()]
		a.mu.Unlock()
		if o != nil {
			o.mu.Lock()
			st.Known = !o.loaded.IsZero()
			for addr, h := range o.holders {
				if !p.Contains(addr) {
					continue
				}
				switch {
				case h.IPID == "":
					// a booking in flight: counted once it answers
				case h.Cluster == cfg.ClusterName:
					st.UsedByCluster++
					if !h.RetainedSince.IsZero() {
						st.Retained++
					}
				default:
					st.UsedByOthers++
				}
			}
			o.mu.Unlock()
		}
		if used := st.UsedByCluster + st.UsedByOthers; st.Total > used {
			st.Free = st.Total - used
		}
		out = append(out, st)
	}
	return out
}

// Refresh lists the subnet of every pool, each subnet once: pools that pick
// addresses need it to pick, and Stats reports from it.
func (a *Allocator) Refresh(ctx context.Context) error {
	var errs []error
	seen := map[string]bool{}
	for _, p := range a.Config().Pools {
		if seen[p.SubnetID()] {
			continue
		}
		seen[p.SubnetID()] = true
		a.invalidate(p)
		if _, err := a.occupancy(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
