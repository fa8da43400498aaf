package ipam

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
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
	// Listed is when the pool's subnet was last listed: the age of its
	// occupancy view and reservation index.
	Listed time.Time `json:"-"`
}

// Stats reports every pool's occupancy without calling the API.
func (v *Inventory) Stats() []PoolStats {
	cfg := v.Config()
	out := make([]PoolStats, 0, len(cfg.Pools))
	for _, p := range cfg.Pools {
		holders, listed := v.existing(p).holdersIn(p)
		st := statsOf(p, cfg.ClusterName, holders)
		st.Listed, st.Known = listed, !listed.IsZero()
		out = append(out, st)
	}
	return out
}

// PoolStatsOf is the occupancy of pool p in ips, a listing of its Private
// Network, as cluster sees it: for a command that has no Inventory.
func PoolStatsOf(p *Pool, cluster string, ips []*scaleway.IP) PoolStats {
	holders := map[netip.Addr]Holder{}
	for _, ip := range ips {
		if p.Contains(ip.Address) {
			holders[ip.Address] = holderOf(ip)
		}
	}
	st := statsOf(p, cluster, holders)
	st.Known = true
	return st
}

func statsOf(p *Pool, cluster string, holders map[netip.Addr]Holder) PoolStats {
	st := PoolStats{Pool: p.Name, Total: p.Total()}
	for _, h := range holders {
		if h.Cluster == cluster {
			st.UsedByCluster++
			if !h.RetainedSince.IsZero() {
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

// holdersIn copies the booked addresses of pool p from its subnet's view;
// bookings still in flight are left out until they answer. listed is when
// the subnet was last listed, zero before its first listing (a nil view).
func (o *occupancy) holdersIn(p *Pool) (holders map[netip.Addr]Holder, listed time.Time) {
	holders = map[netip.Addr]Holder{}
	if o == nil {
		return holders, time.Time{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for addr, h := range o.holders {
		if h.IPID != "" && p.Contains(addr) {
			holders[addr] = h
		}
	}
	return holders, o.loaded
}

// Refresh lists the subnet of every pool, each subnet once: pools that pick
// addresses need it to pick, and Stats reports from it.
func (v *Inventory) Refresh(ctx context.Context) error {
	var errs []error
	// Hints older than every subnet's listing are redundant: each index has
	// what they named. A listing joined in flight may have started before
	// some; a subnet whose listing failed counts from its last one, or from
	// a TTL ago (past it, the sticky path lists the Service and reads no
	// hint), so that failures do not let hints pile up.
	var oldest time.Time
	older := func(t time.Time) {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	seen := map[string]bool{}
	for _, p := range v.Config().Pools {
		if seen[p.SubnetID()] {
			continue
		}
		seen[p.SubnetID()] = true
		o, err := v.view(ctx, p, true)
		if err != nil {
			errs = append(errs, err)
			since := v.clock.Now().Add(-v.ttl)
			if o = v.existing(p); o != nil {
				o.mu.Lock()
				if o.since.After(since) {
					since = o.since
				}
				o.mu.Unlock()
			}
			older(since)
			continue
		}
		o.mu.Lock()
		older(o.since)
		o.mu.Unlock()
	}
	if !oldest.IsZero() {
		v.dropHints(oldest)
	}
	return errors.Join(errs...)
}

// PoolReport is a pool's occupancy and who holds each of its addresses.
type PoolReport struct {
	PoolStats
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
	// RetainedUntil is when the sweeper may release it (zero while used).
	RetainedUntil time.Time `json:"retainedUntil,omitzero"`
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
		holders, _ := v.existing(p).holdersIn(p)
		uses := map[string]*NamespaceUse{}
		for addr, h := range holders {
			ar := AddressReport{Address: addr, IPID: h.IPID, Holder: h.String(), Mine: h.Cluster == cfg.ClusterName, Resource: h.Resource}
			if ar.Mine {
				ar.Holder = "Service " + h.Service.String()
				if h.Resource != nil {
					ar.Holder += ", attached to " + h.Resource.String()
				}
				if at, ok := v.policy.When(p, h.entry()); ok {
					ar.RetainedUntil = at
				}
				use := uses[h.Service.Namespace]
				if use == nil {
					use = &NamespaceUse{Namespace: h.Service.Namespace, Share: cfg.ShareOf(p)}
					uses[h.Service.Namespace] = use
				}
				use.Held++
				if !h.RetainedSince.IsZero() {
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
