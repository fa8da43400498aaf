package view

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// Pool is one pool's occupancy as the inventory last listed it.
type Pool struct {
	Name string
	// Known is false until the pool's subnet was listed once: its IPPool
	// is left as it is.
	Known bool
	// NetworkMissing: the last listing found no such Private Network.
	NetworkMissing bool
	Status         PoolStatus
}

// PoolsOf are the pools of cfg with their occupancy in stats
// (inventory.Stats: what the metrics and `status` count).
func PoolsOf(cfg *ipam.Config, stats []ipam.PoolStats) []Pool {
	byName := make(map[string]ipam.PoolStats, len(stats))
	for _, st := range stats {
		byName[st.Pool] = st
	}
	out := make([]Pool, 0, len(cfg.Pools))
	for _, p := range cfg.Pools {
		st, ok := byName[p.Name]
		out = append(out, Pool{Name: p.Name, Known: ok && (st.Known || st.NetworkMissing), NetworkMissing: st.NetworkMissing, Status: PoolStatus{
			PrivateNetworkID: p.PrivateNetworkID, Subnet: p.Prefix().String(), Ranges: p.Ranges,
			Total: st.Total, Free: st.Free, InUse: st.UsedByCluster - st.Retained, Retained: st.Retained, HeldByOthers: st.UsedByOthers,
		}})
	}
	return out
}

// Conditions are the pool's conditions, without their transition times.
func (p Pool) Conditions() []metav1.Condition {
	exhausted := metav1.Condition{Type: PoolExhausted, Status: metav1.ConditionFalse, Reason: "AddressesFree",
		Message: fmt.Sprintf("%d of %d addresses free", p.Status.Free, p.Status.Total)}
	switch {
	case p.Status.Total == 0:
		exhausted.Status, exhausted.Reason, exhausted.Message = metav1.ConditionUnknown, "TooWideToCount", "the pool is too wide to count its addresses (an IPv6 subnet without ranges)"
	case p.Status.Free == 0:
		exhausted.Status, exhausted.Reason = metav1.ConditionTrue, "NoAddressFree"
		exhausted.Message = fmt.Sprintf("no address free: %d in use, %d retained for deleted Services (released early, oldest first, when a Service needs one), %d held by others", p.Status.InUse, p.Status.Retained, p.Status.HeldByOthers)
	}
	missing := metav1.Condition{Type: PoolNetworkMissing, Status: metav1.ConditionFalse, Reason: "Listed", Message: "its Private Network " + p.Status.PrivateNetworkID + " was listed"}
	if p.NetworkMissing {
		missing.Status, missing.Reason = metav1.ConditionTrue, "NotFound"
		missing.Message = "its Private Network " + p.Status.PrivateNetworkID + " is not found in the pool file's region: deleted, or of another Project or region; fix privateNetworkID in the pool file"
	}
	return []metav1.Condition{exhausted, missing}
}
