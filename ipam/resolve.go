package ipam

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Networks are the Private Networks a pool file names, as VPC answered:
// each by ID, or the error reading it. ipam/inventory reads them.
type Networks struct {
	// Project is the credentials' default Project, "" for none.
	Project string
	Found   map[string]*scaleway.PrivateNetwork
	Failed  map[string]error
}

// NetworkIDs are the Private Networks the pool file names, the nodes' first,
// each once.
func (c *Config) NetworkIDs() []string {
	ids := []string{c.ClusterPrivateNetworkID}
	for _, p := range c.Pools {
		if !slices.Contains(ids, p.PrivateNetworkID) {
			ids = append(ids, p.PrivateNetworkID)
		}
	}
	return ids
}

// Bind checks the pools against their Private Networks: each must exist,
// be in the credentials' Project and hold the pool's subnet (or exactly one
// subnet of its family when the file names none). It fills in the subnet
// and its IPAM ID. An error wraps the first unavailable answer, if any, so
// that callers (the reloader) can tell "try again" from "this file is
// wrong".
func (c *Config) Bind(n Networks) error {
	var errs []error
	if err := n.Failed[c.ClusterPrivateNetworkID]; err != nil {
		errs = append(errs, fmt.Errorf("clusterPrivateNetworkID: Private Network %s: %s", c.ClusterPrivateNetworkID, describe(err, c.Region)))
	}
	for i, p := range c.Pools {
		errs = append(errs, p.resolveOn(i, n.Found[p.PrivateNetworkID], n.Failed[p.PrivateNetworkID], n.Project, c.Region)...)
	}
	// Pools that named no subnet only now cover one: check overlaps again.
	errs = append(errs, c.overlaps()...)
	if len(errs) == 0 {
		return nil
	}
	var transient error
	for _, id := range c.NetworkIDs() {
		if err := n.Failed[id]; err != nil && scaleway.Classify(err) == scaleway.KindUnavailable {
			transient = err
			break
		}
	}
	return fmt.Errorf("pool file does not match the Private Networks:\n  %w%w", joinIndented(errs), cause{transient})
}

// BindPool binds the named pool alone, as Bind does each pool, for callers
// that report pool by pool (preflight). What spans pools (overlaps) is
// Bind's alone.
func (c *Config) BindPool(name string, n Networks) error {
	for i, p := range c.Pools {
		if p.Name == name {
			return errors.Join(p.resolveOn(i, n.Found[p.PrivateNetworkID], n.Failed[p.PrivateNetworkID], n.Project, c.Region)...)
		}
	}
	return fmt.Errorf("no pool %q in the pool file", name)
}

// resolveOn checks pool i against its Private Network pn (or the error
// reading it) and fills in its subnet.
func (p *Pool) resolveOn(i int, pn *scaleway.PrivateNetwork, getErr error, project, region string) (errs []error) {
	where := fmt.Sprintf("pools[%d] (%s)", i, p.Name)
	if getErr == nil && pn == nil {
		getErr = fmt.Errorf("not read")
	}
	if getErr != nil {
		return []error{fmt.Errorf("%s.privateNetworkID: Private Network %s: %s", where, p.PrivateNetworkID, describe(getErr, region))}
	}
	// IPAM books in a network's own Project only: a pool elsewhere would
	// pass every check here and then fail every admission. Without a
	// default Project the SDK sends none and the API decides.
	if project != "" && pn.ProjectID != "" && pn.ProjectID != project {
		return []error{fmt.Errorf("%s.privateNetworkID: Private Network %s (%s) is in Project %s, not in the credentials' Project %s (SCW_DEFAULT_PROJECT_ID): IPAM books an address only in its network's own Project; give this pool a Private Network of Project %s, or run with an API key and SCW_DEFAULT_PROJECT_ID of Project %s (every pool's network must then be there)",
			where, p.PrivateNetworkID, pn.Name, pn.ProjectID, project, project, pn.ProjectID)}
	}
	var match []scaleway.Subnet
	for _, s := range pn.Subnets {
		if s.Prefix.Addr().Is4() != (p.IPFamily == IPv4) {
			continue
		}
		if !p.prefix.IsValid() || s.Prefix == p.prefix {
			match = append(match, s)
		}
	}
	switch {
	case len(match) == 1:
		p.prefix, p.subnetID = match[0].Prefix, match[0].ID
		for _, err := range p.checkInsideSubnet() {
			errs = append(errs, fmt.Errorf("%s.%w", where, err))
		}
	case p.Subnet != "":
		errs = append(errs, fmt.Errorf("%s.subnet: %s is not a subnet of Private Network %s (%s has %s)", where, p.Subnet, p.PrivateNetworkID, pn.Name, subnetList(pn)))
	case len(match) == 0:
		errs = append(errs, fmt.Errorf("%s.privateNetworkID: Private Network %s has no %s subnet (it has %s)", where, p.PrivateNetworkID, p.IPFamily, subnetList(pn)))
	default:
		errs = append(errs, fmt.Errorf("%s.subnet: Private Network %s has several %s subnets (%s); name one", where, p.PrivateNetworkID, p.IPFamily, subnetList(pn)))
	}
	return errs
}

// cause carries an error for errors.As without adding to the message.
type cause struct{ err error }

func (c cause) Error() string { return "" }
func (c cause) Unwrap() error { return c.err }

func subnetList(pn *scaleway.PrivateNetwork) string {
	if len(pn.Subnets) == 0 {
		return "no subnets"
	}
	s := make([]string, len(pn.Subnets))
	for i, sn := range pn.Subnets {
		s[i] = sn.Prefix.String()
	}
	return strings.Join(s, ", ")
}

// describe words an API error for a configuration message. The networks
// are read in the pool file's region, whatever SCW_DEFAULT_REGION says.
func describe(err error, region string) string {
	switch scaleway.Classify(err) {
	case scaleway.KindNotFound:
		return fmt.Sprintf("not found in region %s (the pool file's region) for the API key's Project; check the ID, the pool file's region and SCW_DEFAULT_PROJECT_ID", region)
	case scaleway.KindPermissionDenied:
		return "permission denied: the API key's IAM application needs " + scaleway.PrivateNetworksReadOnly + " on the network's Project (docs/install.md, step 3)"
	case scaleway.KindUnauthenticated:
		return "the API key is refused: unknown, revoked or expired (docs/install.md, step 3)"
	}
	return err.Error()
}
