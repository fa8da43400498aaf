package ipam

import (
	"net/netip"
	"time"
)

// PoolStats is the occupancy of one pool, from the last listing of its
// subnet plus this process's bookings since.
type PoolStats struct {
	Pool string `json:"pool"`
	// Total is the number of addresses the pool can hand out; 0 when the
	// pool is too wide to count (an IPv6 /64 without ranges).
	Total uint64 `json:"total"`
	// UsedByCluster are this cluster's reservations, Retained included.
	UsedByCluster uint64 `json:"usedByCluster"`
	// UsedByOthers are held by other clusters, resources or people.
	UsedByOthers uint64 `json:"usedByOthers"`
	// Retained are this cluster's reservations no Service uses, kept for
	// their retention.
	Retained uint64 `json:"retained"`
	Free     uint64 `json:"free"`
	// Known is false until the pool's subnet has been listed once.
	Known bool `json:"-"`
	// NetworkMissing: the last listing of the pool's subnet found no such
	// Private Network.
	NetworkMissing bool `json:"-"`
	// Listed is when the pool's subnet was last listed: the age of its
	// occupancy view and reservation index.
	Listed time.Time `json:"-"`
}

// PoolStatsOf is the occupancy of pool p in listed, a listing of its Private
// Network, as cluster sees it: for a command that has no Inventory.
func PoolStatsOf(p *Pool, cluster string, listed []*Reservation) PoolStats {
	holders := map[netip.Addr]*Reservation{}
	for _, r := range listed {
		if p.Contains(r.Address) {
			holders[r.Address] = r
		}
	}
	st := StatsOf(p, cluster, holders)
	st.Known = true
	return st
}

// StatsOf is the occupancy of pool p from who holds its addresses.
func StatsOf(p *Pool, cluster string, holders map[netip.Addr]*Reservation) PoolStats {
	st := PoolStats{Pool: p.Name, Total: p.Total()}
	for _, h := range holders {
		if h.Cluster == cluster {
			st.UsedByCluster++
			if !h.OrphanedSince.IsZero() {
				st.Retained++
			}
		} else {
			st.UsedByOthers++
		}
	}
	if used := st.UsedByCluster + st.UsedByOthers; st.Total > used {
		st.Free = st.Total - used
	}
	return st
}
