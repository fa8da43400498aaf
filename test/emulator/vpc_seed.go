package emulator

import (
	"fmt"
	"strings"
)

// --- Go API: seeding Private Networks ---

// AddPrivateNetwork creates a Private Network named name in the default VPC
// of Options.ProjectID, with the given IPv4 (or IPv6) CIDRs, a free
// 172.16.x.0/22 when none is given, and an IPv6 /64 as the API adds one
// unless an IPv6 subnet is given. No HTTP: not counted, never faulted.
func (api *vpcAPI) AddPrivateNetwork(name string, subnets ...string) (PrivateNetwork, error) {
	return api.AddPrivateNetworkWithID("", name, subnets...)
}

// AddPrivateNetworks adds one Private Network per spec "name=cidr[,cidr]"
// (AddPrivateNetwork's rules), the fixtures tests and suites start from,
// and returns them by name.
func (api *vpcAPI) AddPrivateNetworks(specs ...string) (map[string]PrivateNetwork, error) {
	out := make(map[string]PrivateNetwork, len(specs))
	for _, spec := range specs {
		name, cidrs, _ := strings.Cut(spec, "=")
		var subnets []string
		if cidrs != "" {
			subnets = strings.Split(cidrs, ",")
		}
		pn, err := api.AddPrivateNetwork(name, subnets...)
		if err != nil {
			return nil, err
		}
		out[name] = pn
	}
	return out, nil
}

// AddPrivateNetworkWithID is AddPrivateNetwork with a chosen ID, so that a
// pool file written for the playground names networks that exist.
func (api *vpcAPI) AddPrivateNetworkWithID(id, name string, subnets ...string) (PrivateNetwork, error) {
	return api.addPrivateNetwork(pnSpec{id: id, name: name, subnets: subnets})
}

// AddPrivateNetworkInProject is AddPrivateNetwork in another Project than
// Options.ProjectID (in that Project's default VPC), for the checks that
// refuse a pool whose network the credentials cannot book in.
func (api *vpcAPI) AddPrivateNetworkInProject(projectID, name string, subnets ...string) (PrivateNetwork, error) {
	return api.addPrivateNetwork(pnSpec{name: name, projectID: projectID, subnets: subnets})
}

func (api *vpcAPI) addPrivateNetwork(spec pnSpec) (PrivateNetwork, error) {
	api.mu.Lock()
	defer api.mu.Unlock()
	name := spec.name
	pn, err := api.createPNLocked(spec, api.now())
	if err != nil {
		return PrivateNetwork{}, fmt.Errorf("adding Private Network %q: %w", name, err)
	}
	out := PrivateNetwork{ID: pn.id, VPCID: pn.vpc.id, Name: pn.name}
	for _, sn := range pn.subnets {
		out.Subnets = append(out.Subnets, Subnet{ID: sn.id, Prefix: sn.prefix})
	}
	return out, nil
}
