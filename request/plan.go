package request

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// Plan is what an admission will reserve: one allocator request per pool,
// or bring-your-own IDs to validate.
type Plan struct {
	Reserve []ipam.Request
	IDs     []string
	// IDsFrom names the annotation the IDs came from, for denials.
	IDsFrom string
	// recorded[i] is the pool of the address an earlier admission wrote
	// for IDs[i] (nil when unknown): where a restored manifest whose
	// reservation is gone gets a fresh one.
	recorded []*ipam.Pool
}

// Describe names what the plan asks for, for warnings and Events.
func (p *Plan) Describe() string {
	if len(p.IDs) > 0 {
		return "IPAM IDs " + strings.Join(p.IDs, ",")
	}
	if len(p.Reserve) == 1 {
		return "pool " + p.Reserve[0].Pool.Name
	}
	return "pools " + PoolList(p.Reserve)
}

// Fallback is the pool to reserve a fresh address in when validating
// IDs[i] failed because the reservation a restored manifest names is gone
// or being released; nil when the failure stands. Only for private-ip-ids:
// scw-lb-ipam.io/ipam-ids are brought-your-own, never replaced.
func (p *Plan) Fallback(i int, err error) *ipam.Pool {
	if err == nil || p.IDsFrom != ccm.AnnotationPrivateIPIDs {
		return nil
	}
	var ie *ipam.Error
	if !errors.As(err, &ie) {
		return nil
	}
	switch ie.Reason {
	case ipam.ReasonReleasing:
		return ie.Fallback
	case ipam.ReasonIDNotFound:
		if i < len(p.recorded) {
			return p.recorded[i]
		}
	}
	return nil
}

// NewPlan resolves a request against the pool file for a namespace. It
// answers (nil, nil) for a Service that asks for nothing when there is no
// default pool for it: such Services are left alone.
//
// Pools the CCM could not attach together are refused here: two pools on
// one network, no IPv4 pool. The network limit (CheckNetworks) is the
// admission's to check, once it knows the Service gets reservations.
func NewPlan(cfg *ipam.Config, namespace string, r Ask) (*Plan, error) {
	if r.ExternallyManaged {
		return nil, externallyManaged(r)
	}
	switch {
	case len(r.IDs) > 0:
		return &Plan{IDs: r.IDs, IDsFrom: AnnotationIPAMIDs}, nil
	case r.Empty() && len(r.RawIDs) > 0:
		return restored(r, cfg.AllowedPools(namespace)), nil
	case r.Empty():
		def := cfg.DefaultPool()
		if def == nil || !def.Allows(namespace) {
			return nil, nil
		}
		return &Plan{Reserve: []ipam.Request{{Pool: def}}}, nil
	}
	return pooled(cfg, namespace, r)
}

// restored plans a manifest that carries private-ip-ids and asks for
// nothing else (a restored backup, a re-created Service): the IDs, each
// with the allowed pool of the address recorded beside it, where it gets a
// fresh address if the reservation is gone.
func restored(r Ask, allowed []*ipam.Pool) *Plan {
	p := &Plan{IDs: r.RawIDs, IDsFrom: ccm.AnnotationPrivateIPIDs}
	for _, a := range r.Recorded {
		var match *ipam.Pool
		for _, c := range allowed {
			if c.Contains(a) && !c.Disabled {
				match = c
				break
			}
		}
		p.recorded = append(p.recorded, match)
	}
	return p
}

// pooled plans named pools and addresses: one allocator request per pool.
// The pools namespace may use are listed only where they are needed (an
// address without a named pool, a refusal): not on every admission.
func pooled(cfg *ipam.Config, namespace string, r Ask) (*Plan, error) {
	var pools []*ipam.Pool
	for _, name := range r.Pools {
		p, ok := cfg.Pool(name)
		if !ok && r.PoolsFrom != "" {
			return nil, &AnnotationError{r.PoolsFrom, r.PoolsValue, fmt.Sprintf("read as %s, but scw-lb-ipam has no pool %q; pools namespace %s may use: %s", AnnotationPool, truncate(name), namespace, names(cfg.AllowedPools(namespace))), nil}
		}
		if !ok {
			return nil, &AnnotationError{AnnotationPool, strings.Join(r.Pools, ","), fmt.Sprintf("there is no pool %q; pools namespace %s may use: %s", name, namespace, names(cfg.AllowedPools(namespace))), nil}
		}
		if !p.Allows(namespace) {
			return nil, &AnnotationError{AnnotationPool, strings.Join(r.Pools, ","), fmt.Sprintf("pool %q is not allowed for namespace %s; pools it may use: %s", name, namespace, names(cfg.AllowedPools(namespace))), nil}
		}
		pools = append(pools, p)
	}

	// Each address goes to a named pool that contains it, or, when no pool
	// is named, to the allowed pool that contains it.
	p := &Plan{}
	used := map[*ipam.Pool]bool{}
	candidates := pools
	if len(candidates) == 0 && len(r.Addresses) > 0 {
		candidates = cfg.AllowedPools(namespace)
	}
	for _, a := range r.Addresses {
		var match *ipam.Pool
		for _, c := range candidates {
			if c.Contains(a) && !used[c] {
				match = c
				break
			}
		}
		if match == nil {
			return nil, &AnnotationError{AnnotationAddress, JoinAddrs(r.Addresses), addressProblem(a, pools, candidates, namespace), nil}
		}
		used[match] = true
		p.Reserve = append(p.Reserve, ipam.Request{Pool: match, Address: a})
	}
	for _, pool := range pools {
		if !used[pool] {
			p.Reserve = append(p.Reserve, ipam.Request{Pool: pool})
		}
	}
	return p, p.check()
}

// addressProblem names the rule that keeps a out: excluded, outside the
// ranges, reserved by IPAM, or in no pool at all.
func addressProblem(a netip.Addr, named, allowed []*ipam.Pool, namespace string) string {
	if len(named) > 0 {
		why := make([]string, len(named))
		for i, p := range named {
			why[i] = p.Explain(a)
		}
		return fmt.Sprintf("%s; ask for an address inside the pool (scw-lb-ipam status lists the ranges) or name the pool that holds it", strings.Join(why, "; "))
	}
	// A pool whose ranges cover it: excluded, or kept by IPAM.
	for _, p := range allowed {
		if p.Covers(a) {
			return fmt.Sprintf("%s; ask for an address inside the pool (scw-lb-ipam status lists the ranges)", p.Explain(a))
		}
	}
	return fmt.Sprintf("%s is in none of the pools namespace %s may use (%s); ask for an address inside one of them", a, namespace, names(allowed))
}

func names(pools []*ipam.Pool) string {
	if len(pools) == 0 {
		return "none (ask the cluster operator for a pool)"
	}
	s := make([]string, len(pools))
	for i, p := range pools {
		s[i] = p.Name
	}
	return strings.Join(s, ", ")
}

func PoolList(rs []ipam.Request) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Pool.Name
	}
	return strings.Join(s, ",")
}

func JoinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// PoolPNs are the Private Networks of the pools the plan reserves in.
func (p *Plan) PoolPNs() []string {
	out := make([]string, len(p.Reserve))
	for i, r := range p.Reserve {
		out[i] = r.Pool.PrivateNetworkID
	}
	return out
}

// CheckNetworks refuses a plan whose pn-ids would list more networks than
// a Load Balancer attaches (see CheckNetworkLimit): the user's networks or
// the nodes', then the pools'. A Service kept on its DHCP address books
// nothing and is not checked: its Load Balancer is attached already.
func (p *Plan) CheckNetworks(cfg *ipam.Config, r Ask) error {
	if max(len(r.PNIDs), 1)+len(p.Reserve) <= maxPrivateNetworks {
		return nil // the list cannot be longer: no need to build it
	}
	from := PNOrigin(r.PNIDs)
	if len(p.Reserve) > 0 {
		from += ", then those of pools " + PoolList(p.Reserve)
	}
	return CheckNetworkLimit(PNList(r.PNIDs, []string{cfg.ClusterPrivateNetworkID}, p.PoolPNs()), from)
}

// check holds the CCM's contract on the pools of a plan: one IP per Private
// Network, and at least one IPv4 address (the CCM reports IPv4 status only).
func (p *Plan) check() error {
	pns := make([]string, len(p.Reserve))
	v4 := false
	for i, r := range p.Reserve {
		pns[i] = r.Pool.PrivateNetworkID
		v4 = v4 || r.Pool.IPFamily == ipam.IPv4
	}
	if i, j, shared := sharedNetwork(pns); shared {
		return &AnnotationError{AnnotationPool, PoolList(p.Reserve), fmt.Sprintf("pools %q and %q are on the same Private Network %s, and a Load Balancer takes one IP per Private Network; ask for one of them", p.Reserve[i].Pool.Name, p.Reserve[j].Pool.Name, pns[j]), nil}
	}
	if !v4 {
		return &AnnotationError{AnnotationPool, PoolList(p.Reserve), "only IPv6 pools are requested; the CCM reports IPv4 status only, so a private Load Balancer needs an IPv4 pool too", nil}
	}
	return nil
}
