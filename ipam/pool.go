package ipam

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
)

// IsName reports whether s may name a pool or a cluster: a lower-case DNS
// label (RFC 1123), since names end up in annotations and IPAM tags.
func IsName(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// Pool returns the pool called name.
func (c *Config) Pool(name string) (*Pool, bool) {
	for _, p := range c.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// PoolOf is the pool a reservation belongs to: the pool its tag names, or,
// when no pool has that name any more (a renamed pool), the pool whose
// subnet and ranges hold its address. false when neither: a removed pool.
// Admissions and the sweeper both judge a reservation's retention by it.
func (c *Config) PoolOf(e Entry, subnetID string, addr netip.Addr) (*Pool, bool) {
	if p, ok := c.Pool(e.Pool); ok {
		return p, true
	}
	for _, p := range c.Pools {
		if p.Holds(subnetID, addr) {
			return p, true
		}
	}
	return nil, false
}

// Holds reports whether an IP of the subnet at addr is in the pool's address
// space: its subnet, inside its ranges, exclusions aside (an address the
// operator excluded later stays with the Service that has it).
func (p *Pool) Holds(subnetID string, addr netip.Addr) bool {
	return subnetID == p.subnetID && p.Covers(addr)
}

// DefaultPool is the pool for Services that ask for nothing, or nil.
func (c *Config) DefaultPool() *Pool {
	for _, p := range c.Pools {
		if p.Default {
			return p
		}
	}
	return nil
}

// AllowedPools lists the pools namespace may use, in file order.
func (c *Config) AllowedPools(namespace string) []*Pool {
	var out []*Pool
	for _, p := range c.Pools {
		if p.Allows(namespace) {
			out = append(out, p)
		}
	}
	return out
}

// Allows reports whether namespace may use the pool.
func (p *Pool) Allows(namespace string) bool {
	if len(p.Namespaces) == 0 {
		return true
	}
	for _, g := range p.Namespaces {
		if ok, _ := path.Match(g, namespace); ok {
			return true
		}
	}
	return false
}

// AutoAssigns reports whether the pool hands out addresses to Services that
// name the pool without an address.
func (p *Pool) AutoAssigns() bool { return p.AutoAssign == nil || *p.AutoAssign }

// ShareOf is how many addresses of pool p one namespace may hold, live and
// retained reservations counted; 0 means no cap.
func (c *Config) ShareOf(p *Pool) int {
	if p.MaxPerNamespace != nil {
		return *p.MaxPerNamespace
	}
	return c.DefaultMaxPerNamespace
}

// Prefix is the pool's subnet (valid once known from the file or Resolve).
func (p *Pool) Prefix() netip.Prefix { return p.prefix }

// SubnetID is the IPAM ID of the pool's subnet, known after Resolve.
func (p *Pool) SubnetID() string { return p.subnetID }

// PicksAddresses reports whether the project picks addresses itself (the
// pool has ranges or exclusions) rather than letting IPAM choose.
func (p *Pool) PicksAddresses() bool { return p.picks }

// Contains reports whether a may be handed out by the pool: inside its
// ranges (or subnet), not excluded, and not one of the subnet's first two or
// last two addresses, which IPAM keeps for itself.
func (p *Pool) Contains(a netip.Addr) bool {
	if p.include == nil || !p.include.Contains(a) || (p.exclude != nil && p.exclude.Contains(a)) {
		return false
	}
	if p.prefix.IsValid() {
		for _, r := range reservedAddrs(p.prefix) {
			if r == a {
				return false
			}
		}
	}
	return true
}

// Covers reports whether a is inside the pool's ranges (or subnet), before
// exclusions and the addresses IPAM keeps.
func (p *Pool) Covers(a netip.Addr) bool { return p.include != nil && p.include.Contains(a) }

// Explain says which rule keeps a out of the pool, for denials; "" when the
// pool contains it.
func (p *Pool) Explain(a netip.Addr) string {
	switch {
	case p.Contains(a):
		return ""
	case p.prefix.IsValid() && !p.prefix.Contains(a):
		return fmt.Sprintf("%s is outside pool %s's subnet %s", a, p.Name, p.prefix)
	case p.exclude != nil && p.exclude.Contains(a):
		return fmt.Sprintf("%s is excluded from pool %s (exclude: %s)", a, p.Name, strings.Join(p.Exclude, ", "))
	case p.include == nil || !p.include.Contains(a):
		return fmt.Sprintf("%s is outside pool %s's ranges %s", a, p.Name, strings.Join(p.Ranges, ", "))
	}
	return fmt.Sprintf("%s is reserved by Scaleway IPAM (the first two and last two addresses of %s)", a, p.prefix)
}

// NewSpace builds the pool's candidate set for picking.
func (p *Pool) NewSpace() (*addrspace.Space, error) {
	var x netipx.IPSetBuilder
	x.AddSet(p.exclude)
	for _, a := range reservedAddrs(p.prefix) {
		x.Add(a)
	}
	exclude, _ := x.IPSet()
	return addrspace.New(p.include, exclude)
}

// Total is the number of addresses the pool can hand out.
func (p *Pool) Total() uint64 {
	if s, err := p.NewSpace(); err == nil {
		return s.Size()
	}
	return 0
}

// reservedAddrs are the first two and last two addresses of a subnet.
func reservedAddrs(pr netip.Prefix) []netip.Addr {
	if !pr.IsValid() {
		return nil
	}
	r := netipx.RangeOfPrefix(pr)
	first, last := r.From(), r.To()
	return []netip.Addr{first, first.Next(), last.Prev(), last}
}

// checkInsideSubnet needs the subnet, known from the file or from Resolve.
func (p *Pool) checkInsideSubnet() []error {
	var errs []error
	sub := netipx.RangeOfPrefix(p.prefix)
	for i, it := range p.Ranges {
		if r, err := parseRange(it); err == nil && !(sub.Contains(r.From()) && sub.Contains(r.To())) {
			errs = append(errs, fmt.Errorf("ranges[%d]: %q is outside subnet %s; a range must lie inside the pool's subnet", i, it, p.prefix))
		}
	}
	if len(p.Ranges) == 0 {
		var b netipx.IPSetBuilder
		b.AddPrefix(p.prefix)
		p.include, _ = b.IPSet()
	}
	if p.picks && len(errs) == 0 {
		if _, err := p.NewSpace(); err != nil {
			errs = append(errs, fmt.Errorf("ranges: %w", err))
		}
	}
	return errs
}

// PoolOfID is the pool of namespace whose address space holds addr on
// subnetID, else the
// first on its subnet, else nil; allowed names the pools namespace may use.
func (c *Config) PoolOfID(namespace, subnetID string, addr netip.Addr) (pool *Pool, allowed []string) {
	for _, p := range c.AllowedPools(namespace) {
		allowed = append(allowed, p.Name)
		if p.SubnetID() == subnetID && (pool == nil || p.Holds(subnetID, addr) && !pool.Holds(subnetID, addr)) {
			pool = p
		}
	}
	return pool, allowed
}

func parseRange(s string) (netipx.IPRange, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			return netipx.IPRange{}, err
		}
		return netipx.RangeOfPrefix(pr.Masked()), nil
	}
	if strings.Contains(s, "-") {
		r, err := netipx.ParseIPRange(s)
		if err != nil {
			return netipx.IPRange{}, err
		}
		return r, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netipx.IPRange{}, err
	}
	return netipx.IPRangeFrom(a, a), nil
}
