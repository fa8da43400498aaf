package inventory

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Stats reports every pool's occupancy without calling the API.
func (v *Inventory) Stats() []ipam.PoolStats {
	cfg := v.Config()
	out := make([]ipam.PoolStats, 0, len(cfg.Pools))
	for _, p := range cfg.Pools {
		o := v.subnets.existing(p)
		holders, listed := o.holdersIn(p)
		st := ipam.StatsOf(p, cfg.ClusterName, holders)
		st.Listed, st.Known = listed, !listed.IsZero()
		st.NetworkMissing = scaleway.Classify(o.lastListing()) == scaleway.KindNotFound
		out = append(out, st)
	}
	return out
}

// PoolReport is a pool's occupancy and who holds each of its addresses.
type PoolReport struct {
	ipam.PoolStats
	PrivateNetworkID string          `json:"privateNetworkID"`
	Subnet           string          `json:"subnet"`
	Ranges           []string        `json:"ranges,omitempty"`
	Addresses        []AddressReport `json:"addresses"`
	// Namespaces is each namespace's use of the pool, by name.
	Namespaces []NamespaceUse `json:"namespaces"`
}

// NamespaceUse is what one namespace holds of a pool: its reservations,
// live and retained, against its share (maxPerNamespace).
type NamespaceUse struct {
	Namespace string `json:"namespace"`
	Held      int    `json:"held"`
	Retained  int    `json:"retained"`
	// Share is the pool's maxPerNamespace, 0 when it has none.
	Share int `json:"share,omitempty"`
}

// AddressReport is one booked address of a pool.
type AddressReport struct {
	Address netip.Addr `json:"address"`
	IPID    string     `json:"ipamID"`
	// Holder names who holds it: "Service ns/name", "Service ns/name
	// (cluster other)", a resource ("lb_server my-lb"), or "IPAM IP <id>".
	Holder string `json:"holder"`
	// Mine is true for this cluster's reservations.
	Mine bool `json:"mine"`
	// RetainedUntil is when the sweeper may release it (zero while used),
	// and RetainedSince since when no live Service references it.
	RetainedUntil time.Time `json:"retainedUntil,omitzero"`
	RetainedSince time.Time `json:"retainedSince,omitzero"`
	// Convergence is, for an address a live Service references, whether
	// its Load Balancer has it (status --kubeconfig fills it in).
	Convergence string `json:"convergence,omitempty"`
	// Resource is what IPAM shows it attached to, nil for nothing.
	Resource *scaleway.Resource `json:"-"`
}

// Report is Stats with the addresses, sorted, for the status command.
func (v *Inventory) Report() []PoolReport {
	cfg := v.Config()
	stats := v.Stats()
	out := make([]PoolReport, 0, len(stats))
	for i, p := range cfg.Pools {
		r := PoolReport{PoolStats: stats[i], PrivateNetworkID: p.PrivateNetworkID, Subnet: p.Prefix().String(), Ranges: p.Ranges, Addresses: []AddressReport{}}
		holders, _ := v.subnets.existing(p).holdersIn(p)
		uses := map[string]*NamespaceUse{}
		for addr, h := range holders {
			ar := AddressReport{Address: addr, IPID: h.ID, Holder: h.String(), Mine: h.Cluster == cfg.ClusterName, Resource: h.Resource}
			if ar.Mine {
				ar.Holder = "Service " + h.Service.String()
				if h.Resource != nil {
					ar.Holder += ", attached to " + h.Resource.String()
				}
				if at, ok := v.policy.When(p, h.Entry); ok {
					ar.RetainedUntil = at
				}
				ar.RetainedSince = h.OrphanedSince
				// By the ledger's namespace tag, as the share counts.
				ns := h.JudgedNamespace()
				use := uses[ns]
				if use == nil {
					use = &NamespaceUse{Namespace: ns, Share: cfg.ShareOf(p)}
					uses[ns] = use
				}
				use.Held++
				if !h.OrphanedSince.IsZero() {
					use.Retained++
				}
			}
			r.Addresses = append(r.Addresses, ar)
		}
		slices.SortFunc(r.Addresses, func(x, y AddressReport) int { return x.Address.Compare(y.Address) })
		r.Namespaces = make([]NamespaceUse, 0, len(uses))
		for _, u := range uses {
			r.Namespaces = append(r.Namespaces, *u)
		}
		slices.SortFunc(r.Namespaces, func(x, y NamespaceUse) int { return strings.Compare(x.Namespace, y.Namespace) })
		out = append(out, r)
	}
	return out
}
