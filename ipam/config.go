package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go4.org/netipx"
	"sigs.k8s.io/yaml"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// DefaultRetention is how long a reservation outlives its Service when the
// pool does not say: long enough to survive a Helm upgrade that re-creates it.
const DefaultRetention = 24 * time.Hour

// Family is an IP address family of a pool.
type Family string

const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// Config is the pool file. Each field's doc comment is its description in
// docs/pool-file.md and the chart's values.schema.json, which make generate
// writes from it; a "+schema: {…}" line adds JSON Schema keywords to what
// the field's Go type gives, "+required" makes the field required, and
// "+enum: scaleway.Regions()" takes the values from the SDK's regions.
type Config struct {
	// ClusterName is written into the tags of every reservation (the
	// ledger); it must be unique among the clusters that share a Private
	// Network. A lower-case DNS label, e.g. "prod-par".
	// +schema: {"pattern": "^$|^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"}
	ClusterName string `json:"clusterName"`
	// Region is the Scaleway region of the cluster and of every pool's
	// Private Network.
	// +enum: scaleway.Regions()
	Region string `json:"region"`
	// ClusterPrivateNetworkID is the nodes' Private Network (the CCM's
	// PN_ID, private_network_id in scw k8s cluster get): always kept in
	// the pn-ids annotation, so that the Load Balancer reaches its backends.
	// +schema: {"anyOf": [{"const": ""}, {"$ref": "#/definitions/uuid"}]}
	ClusterPrivateNetworkID string `json:"clusterPrivateNetworkID"`
	// Pools are the named sets of addresses Services ask for; at least one.
	Pools []*Pool `json:"pools"`
	// DefaultMaxPerNamespace is the share of a pool that does not set its
	// own maxPerNamespace: how many of its addresses one namespace may hold,
	// live and retained reservations counted. 0 means no cap.
	// +schema: {"minimum": 0}
	DefaultMaxPerNamespace int `json:"defaultMaxPerNamespace,omitempty"`
	// TranslateRequests reads the requests other implementations' users
	// write (MetalLB, Cilium, Calico and kube-vip annotations, the EKS and
	// AKS private-address annotations, spec.loadBalancerIP) as
	// scw-lb-ipam.io/pool and address, with a warning naming each. On
	// unless false; false refuses spec.loadBalancerIP on a private Load
	// Balancer and ignores the other words.
	TranslateRequests *bool `json:"translateRequests,omitempty"`
	// DNSTarget writes external-dns's target annotation (under the prefix
	// of the Service's hostname annotation) with the reserved addresses,
	// so that DNS gets the reserved address and not the Load Balancer's
	// DHCP one; a target the user set is kept. On unless false.
	DNSTarget *bool `json:"dnsTarget,omitempty"`
	// GatewayControllers are the namespaces where a Gateway controller
	// creates the Services of other namespaces' Gateways (Envoy Gateway:
	// envoy-gateway-system), each with the label that carries the owning
	// Gateway's namespace (gateway.envoyproxy.io/owning-gateway-namespace;
	// it must contain "gateway"). A Service there is judged by that
	// namespace (pools' namespaces, shares); the label is trusted only in
	// the namespaces listed here.
	GatewayControllers []GatewayController `json:"gatewayControllers,omitempty"`
}

// Pool is one named set of addresses on a Private Network.
type Pool struct {
	// Name is what Services ask for in scw-lb-ipam.io/pool, and what the
	// pool's reservations are tagged with. A lower-case DNS label, unique
	// in the file.
	// +required
	// +schema: {"pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"}
	Name string `json:"name"`
	// PrivateNetworkID is the Private Network the pool's addresses are
	// booked on. It must be in the Project of the credentials
	// (SCW_DEFAULT_PROJECT_ID): IPAM books an address only in its network's
	// own Project.
	// +required
	// +schema: {"$ref": "#/definitions/uuid"}
	PrivateNetworkID string `json:"privateNetworkID"`
	// Subnet is the network's subnet the pool takes its addresses from, in
	// CIDR form. It may be left out when the Private Network has a single
	// subnet of the pool's family.
	Subnet string `json:"subnet,omitempty"`
	// IPFamily is IPv4 (the default) or IPv6.
	IPFamily Family `json:"ipFamily,omitempty"`
	// Ranges are the addresses the pool hands out, as "first-last" ranges
	// or CIDR prefixes inside the subnet; empty means IPAM chooses any free
	// address of the subnet.
	Ranges []string `json:"ranges,omitempty"`
	// Exclude lists addresses, ranges or prefixes the pool never hands out.
	Exclude []string `json:"exclude,omitempty"`
	// Namespaces that may use the pool, as globs ("edge-*"); empty means
	// every opted-in namespace.
	// +schema: {"items": {"type": "string", "minLength": 1}}
	Namespaces []string `json:"namespaces,omitempty"`
	// AutoAssign false restricts the pool to explicit address requests
	// (scw-lb-ipam.io/address); the default is true.
	AutoAssign *bool `json:"autoAssign,omitempty"`
	// Default makes the pool serve Services that ask for nothing; at most
	// one pool is the default.
	Default bool `json:"default,omitempty"`
	// Disabled drains the pool: it gives its Services their reservations
	// back and refuses new bookings.
	Disabled bool `json:"disabled,omitempty"`
	// Retention is how long a reservation outlives its Service, waiting for
	// it to come back (a Go duration such as "90m", or whole days such as
	// "7d"); the default is 24h, and 0 releases it as soon as the Load
	// Balancer lets it go (written 0, "0" or "0s").
	// +schema: {"anyOf": [{"$ref": "#/definitions/duration"}, {"enum": [0, "0"]}]}
	Retention Duration `json:"retention,omitempty"`
	// MaxPerNamespace caps the addresses of the pool one namespace holds,
	// its live and retained reservations counted: a namespace that churns
	// Service names cannot grow past it. 0 means no cap; unset, the file's
	// defaultMaxPerNamespace applies.
	// +schema: {"minimum": 0}
	MaxPerNamespace *int `json:"maxPerNamespace,omitempty"`
	// AdoptFrom names the clusters whose reservations a CREATE in this pool
	// may take over (a cluster migration): those of the same Service on the
	// pool's network and address space. Other clusters' are never touched.
	// +schema: {"items": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"}, "uniqueItems": true}
	AdoptFrom []string `json:"adoptFrom,omitempty"`

	prefix   netip.Prefix
	subnetID string
	include  *netipx.IPSet // ranges, or the whole subnet
	exclude  *netipx.IPSet
	picks    bool // we pick addresses (ranges or exclude set); otherwise IPAM does
}

// ParseConfig reads a pool file strictly (unknown fields are errors) and
// validates it. The Private Networks are checked later by Resolve.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("pool file: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks everything that needs no API call, and compiles the
// pools' address sets. Every problem is reported, each naming its pool and
// field.
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.ClusterName == "":
		add("clusterName", "required; a name unique among the clusters sharing these Private Networks, e.g. \"prod-par\"")
	case !IsName(c.ClusterName):
		add("clusterName", "%q must be a lower-case DNS label (a-z, 0-9, '-', at most 63 characters)", c.ClusterName)
	}
	if regions := scaleway.Regions(); !slices.Contains(regions, c.Region) {
		add("region", "%q is not a Scaleway region with IPAM; use one of %s", c.Region, strings.Join(regions, ", "))
	}
	if err := uuid.Validate(c.ClusterPrivateNetworkID); err != nil {
		add("clusterPrivateNetworkID", "%q is not a Private Network ID (a UUID); it is the nodes' Private Network, the CCM's PN_ID", c.ClusterPrivateNetworkID)
	}
	if len(c.Pools) == 0 {
		add("pools", "at least one pool is required")
	}
	if c.DefaultMaxPerNamespace < 0 {
		add("defaultMaxPerNamespace", "%d is negative; use the number of addresses one namespace may hold in a pool, or 0 for no cap", c.DefaultMaxPerNamespace)
	}
	seen := map[string]int{}
	defaults := []string{}
	for i, p := range c.Pools {
		where := fmt.Sprintf("pools[%d]", i)
		if p == nil {
			add(where, "empty pool")
			continue
		}
		if p.Name != "" {
			where = fmt.Sprintf("pools[%d] (%s)", i, p.Name)
		}
		for _, err := range slices.Concat(p.compile(), p.checkShare(), p.checkAdoptFrom(c.ClusterName)) {
			errs = append(errs, fmt.Errorf("%s.%w", where, err))
		}
		if p.Name != "" {
			if j, dup := seen[p.Name]; dup {
				add(where+".name", "%q is already the name of pools[%d]; pool names must be unique", p.Name, j)
			}
			seen[p.Name] = i
		}
		if p.Default {
			defaults = append(defaults, p.Name)
			if why := p.cannotBeDefault(); why != "" {
				add(where+".default", "%s", why)
			}
		}
	}
	if len(defaults) > 1 {
		add("pools", "%d pools are marked default (%s); at most one may be", len(defaults), strings.Join(defaults, ", "))
	}
	errs = append(errs, c.overlaps()...)
	errs = append(errs, c.checkGatewayControllers()...)
	if len(errs) > 0 {
		return fmt.Errorf("pool file is invalid:\n  %w", joinIndented(errs))
	}
	return nil
}

// checkShare refuses a negative maxPerNamespace.
func (p *Pool) checkShare() []error {
	if p.MaxPerNamespace != nil && *p.MaxPerNamespace < 0 {
		return []error{fmt.Errorf("maxPerNamespace: %d is negative; use the number of addresses one namespace may hold in this pool, or 0 for no cap", *p.MaxPerNamespace)}
	}
	return nil
}

// checkAdoptFrom checks the clusters a pool takes reservations over from:
// cluster names, each once, never this cluster (its own reservations are
// taken back anyway).
func (p *Pool) checkAdoptFrom(self string) (errs []error) {
	seen := map[string]int{}
	for i, name := range p.AdoptFrom {
		field := fmt.Sprintf("adoptFrom[%d]", i)
		switch j, dup := seen[name]; {
		case !IsName(name):
			errs = append(errs, fmt.Errorf("%s: %q is not a cluster name (a lower-case DNS label, as clusterName is); write the clusterName of the cluster whose reservations this pool takes over", field, name))
		case dup:
			errs = append(errs, fmt.Errorf("%s: %q is already adoptFrom[%d]; list each cluster once", field, name, j))
		case name == self:
			errs = append(errs, fmt.Errorf("%s: %q is this pool file's own clusterName; a cluster takes its own reservations back without it, remove it", field, name))
		}
		seen[name] = i
	}
	return errs
}

// cannotBeDefault says why the pool cannot serve Services that ask for
// nothing, "" when it can.
func (p *Pool) cannotBeDefault() string {
	switch {
	case p.IPFamily == IPv6:
		return "an IPv6 pool cannot be the default: a Service that asks for nothing would get only an IPv6 address, and the CCM reports IPv4 status only"
	case p.Disabled:
		return "a disabled pool cannot be the default: every Service that asks for nothing would be denied; move default to another pool"
	case !p.AutoAssigns():
		return "a pool with autoAssign: false cannot be the default: it only serves explicit address requests"
	}
	return ""
}

// joinIndented joins errors one per line, for the log and the reload event.
func joinIndented(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "\n  "))
}

// compile checks one pool's own fields and builds its address sets.
func (p *Pool) compile() (errs []error) {
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !IsName(p.Name) {
		add("name", "%q must be a lower-case DNS label (a-z, 0-9, '-', at most 63 characters): it is used in annotations and tags", p.Name)
	}
	if err := uuid.Validate(p.PrivateNetworkID); err != nil {
		add("privateNetworkID", "%q is not a Private Network ID (a UUID)", p.PrivateNetworkID)
	}
	switch p.IPFamily {
	case IPv4, IPv6:
	case "":
		p.IPFamily = IPv4
	default:
		add("ipFamily", "%q is not a family; use IPv4 or IPv6", p.IPFamily)
		return errs
	}
	p.prefix = netip.Prefix{}
	if p.Subnet != "" {
		pr, err := netip.ParsePrefix(p.Subnet)
		switch {
		case err != nil:
			add("subnet", "%q is not a CIDR block such as 172.16.4.0/22", p.Subnet)
		case pr != pr.Masked():
			add("subnet", "%q has host bits set; did you mean %s?", p.Subnet, pr.Masked())
		case pr.Addr().Is4() != (p.IPFamily == IPv4):
			add("subnet", "%s is not an %s subnet; set ipFamily to match", pr, p.IPFamily)
		default:
			p.prefix = pr
		}
	}
	include, ierrs := p.parseSet("ranges", p.Ranges)
	exclude, xerrs := p.parseSet("exclude", p.Exclude)
	errs = append(errs, ierrs...)
	errs = append(errs, xerrs...)
	p.include, p.exclude = include, exclude
	p.picks = len(p.Ranges) > 0 || len(p.Exclude) > 0
	if d := p.Retention.Duration; d < 0 {
		add("retention", "%s is negative; use 0 for no stickiness (released as soon as the Load Balancer lets go)", d)
	} else if !p.Retention.set {
		p.Retention.Duration = DefaultRetention
	}
	for i, ns := range p.Namespaces {
		if _, err := path.Match(ns, ""); err != nil || ns == "" {
			add(fmt.Sprintf("namespaces[%d]", i), "%q is not a namespace name or glob such as \"edge-*\"", ns)
		}
	}
	if p.prefix.IsValid() && len(errs) == 0 {
		errs = append(errs, p.checkInsideSubnet()...)
	}
	return errs
}

// parseSet reads ranges such as "172.16.4.200-172.16.4.250", "172.16.5.0/28"
// or a single address, all of the pool's family.
func (p *Pool) parseSet(field string, items []string) (*netipx.IPSet, []error) {
	var b netipx.IPSetBuilder
	var errs []error
	for i, it := range items {
		r, err := parseRange(it)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is not an address, a range \"a-b\" or a CIDR block", field, i, it))
			continue
		}
		if r.From().Is4() != (p.IPFamily == IPv4) {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is not %s, the pool's ipFamily", field, i, it, p.IPFamily))
			continue
		}
		b.AddRange(r)
	}
	s, _ := b.IPSet() // the builder only errs on invalid ranges, filtered above
	return s, errs
}

// overlaps reports pools of one Private Network whose addresses intersect:
// they would compete for the same addresses with different rules.
func (c *Config) overlaps() []error {
	var errs []error
	for i, a := range c.Pools {
		for _, b := range c.Pools[i+1:] {
			if a == nil || b == nil || a.PrivateNetworkID != b.PrivateNetworkID || a.include == nil || b.include == nil {
				continue
			}
			if a.IPFamily != b.IPFamily {
				continue
			}
			if a.include.Overlaps(b.include) {
				errs = append(errs, fmt.Errorf("pools %q and %q: their addresses overlap on Private Network %s; give each pool its own ranges", a.Name, b.Name, a.PrivateNetworkID))
			}
		}
	}
	return errs
}
