package emulator

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// PrivateNetwork is a seeded Private Network.
type PrivateNetwork struct {
	ID, VPCID, Name string
	// Subnets in the API's order: the IPv4 ones as given, then the IPv6 /64.
	Subnets []Subnet
}

// Subnet is a subnet of a Private Network.
type Subnet struct {
	ID     string
	Prefix netip.Prefix
}

// Private Networks created without subnets get a /22 of autoV4Space, from
// autoV4Start on (as recorded for a fresh VPC), then from the space's start.
const (
	autoV4Space = "172.16.0.0/12"
	autoV4Start = "172.16.16.0"
	autoV4End   = "172.32.0.0"
)

func (pn *pnRec) json(region string) pnJSON {
	out := pnJSON{
		CreatedAt:                      ts(pn.createdAt),
		DefaultRoutePropagationEnabled: pn.defaultRoutePropagation,
		DHCPEnabled:                    true,
		ID:                             pn.id,
		Name:                           pn.name,
		OrganizationID:                 pn.orgID,
		ProjectID:                      pn.projectID,
		Region:                         region,
		Subnets:                        make([]subnetJSON, len(pn.subnets)),
		Tags:                           nonNil(pn.tags),
		UpdatedAt:                      ts(pn.updatedAt),
		VpcID:                          pn.vpc.id,
	}
	for i, sn := range pn.subnets {
		out.Subnets[i] = sn.json(region)
	}
	return out
}

func (sn *subnetRec) json(region string) subnetJSON {
	return subnetJSON{
		CreatedAt:        ts(sn.createdAt),
		ID:               sn.id,
		PrivateNetworkID: sn.pn.id,
		ProjectID:        sn.pn.projectID,
		Region:           region,
		Subnet:           sn.prefix.String(),
		UpdatedAt:        ts(sn.updatedAt),
		VpcID:            sn.pn.vpc.id,
	}
}

// --- Private Networks ---

type pnSpec struct {
	id              string // "": a new one
	name, projectID string
	tags            []string
	subnets         []string // nil: choose a free /22
	vpcID           string   // "": the project's default VPC
	defaultRoutes   bool
}

// createPNLocked creates a Private Network as CreatePrivateNetwork does,
// refusing in the API's order: the VPC named, the subnets asked for, their
// overlaps in the VPC, then the subnets it adds (an IPv4 /22 when none is
// asked for, an IPv6 /64 unless one is).
func (api *vpcAPI) createPNLocked(spec pnSpec, now time.Time) (*pnRec, error) {
	if spec.projectID == "" {
		spec.projectID = api.opts.ProjectID
	}
	var vpc *vpcRec
	if spec.vpcID != "" {
		if vpc = api.st.vpcs[spec.vpcID]; vpc == nil {
			return nil, notFoundErr("vpc", spec.vpcID)
		}
	}
	prefixes, err := parseSubnets(spec.subnets)
	if err != nil {
		return nil, err
	}
	if vpc == nil {
		vpc = api.defaultVPCLocked(spec.projectID, now)
	}
	orgID := api.projectOrgLocked(spec.projectID)
	if prefixes, err = api.st.pnSubnets(vpc, prefixes, orgID); err != nil {
		return nil, err
	}
	id := spec.id
	if id == "" {
		id = newID()
	} else if _, taken := api.st.pns[id]; taken {
		return nil, fmt.Errorf("a Private Network with ID %s already exists", id)
	}
	pn := &pnRec{
		id: id, name: spec.name, projectID: spec.projectID, orgID: orgID, vpc: vpc,
		tags: nonNil(spec.tags), defaultRoutePropagation: spec.defaultRoutes,
		createdAt: now, updatedAt: now, seq: api.st.nextSeq(),
	}
	if pn.name == "" {
		pn.name = "pn-" + pn.id[:8]
	}
	api.st.indexPN(pn, prefixes, now)
	return pn, nil
}

// parseSubnets checks the subnets a request asks for: CIDRs without host
// bits, large enough for IPAM's four kept addresses, not overlapping each
// other.
func parseSubnets(raw []string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for i, r := range raw {
		p, err := netip.ParsePrefix(r)
		arg := fmt.Sprintf("subnets.%d", i)
		switch {
		case err != nil:
			return nil, invalidArgumentErr(arg, "%q is not a CIDR", r)
		case p != p.Masked():
			return nil, invalidArgumentErr(arg, "%s has host bits set; the subnet is %s", r, p.Masked())
		case p.Addr().Is4() && p.Bits() > 30, p.Addr().Is6() && p.Bits() > 126:
			return nil, invalidArgumentErr(arg, "%s is too small: IPAM keeps four addresses of every subnet", r)
		}
		for j, q := range prefixes {
			if q.Overlaps(p) {
				return nil, invalidArgumentErr(arg, "%s overlaps subnets.%d (%s)", p, j, q)
			}
		}
		prefixes = append(prefixes, p)
	}
	return prefixes, nil
}

// pnSubnets are the subnets a new Private Network of vpc gets: those asked
// for, which must overlap nothing in vpc, or a free IPv4 /22; and an IPv6
// /64 unless one is asked for. IPv4 first.
func (st *state) pnSubnets(vpc *vpcRec, prefixes []netip.Prefix, orgID string) ([]netip.Prefix, error) {
	for i, p := range prefixes {
		if other := overlapInVPC(vpc, p); other != nil {
			return nil, invalidArgumentErr(fmt.Sprintf("subnets.%d", i), "%s overlaps subnet %s of Private Network %s in VPC %s", p, other.prefix, other.pn.id, vpc.id)
		}
	}
	if len(prefixes) == 0 {
		p, found := freeAutoV4(vpc)
		if !found {
			return nil, outOfStockErr("subnet")
		}
		prefixes = append(prefixes, p)
	}
	// The API adds an IPv6 /64 to every Private Network (recorded); it is
	// taken from a /48 of the organization's, as recorded.
	if !slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
		prefixes = append(prefixes, st.freeULA64(orgID))
	}
	slices.SortStableFunc(prefixes, func(a, b netip.Prefix) int {
		return cmp.Compare(a.Addr().BitLen(), b.Addr().BitLen())
	})
	return prefixes, nil
}

// indexPN adds pn, with a subnet per prefix, to the state and its VPC.
func (st *state) indexPN(pn *pnRec, prefixes []netip.Prefix, now time.Time) {
	for _, p := range prefixes {
		sn := newSubnet(newID(), p, pn, now, st.nextSeq())
		pn.subnets = append(pn.subnets, sn)
		st.subnets[sn.id] = sn
	}
	st.pns[pn.id] = pn
	pn.vpc.pns[pn.id] = pn
}

func overlapInVPC(vpc *vpcRec, p netip.Prefix) *subnetRec {
	for _, pn := range vpc.pns {
		for _, sn := range pn.subnets {
			if sn.prefix.Overlaps(p) {
				return sn
			}
		}
	}
	return nil
}

// freeAutoV4 is the first /22 of 172.16.0.0/12, from 172.16.16.0/22 on,
// that overlaps nothing in vpc.
func freeAutoV4(vpc *vpcRec) (netip.Prefix, bool) {
	space := netip.MustParsePrefix(autoV4Space)
	try := func(from, to netip.Addr) (netip.Prefix, bool) {
		for a := from; space.Contains(a) && a.Compare(to) < 0; {
			p := netip.PrefixFrom(a, 22)
			if overlapInVPC(vpc, p) == nil {
				return p, true
			}
			b := a.As4()
			next := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
			next += 1 << 10
			a = netip.AddrFrom4([4]byte{byte(next >> 24), byte(next >> 16), byte(next >> 8), byte(next)})
		}
		return netip.Prefix{}, false
	}
	start := netip.MustParseAddr(autoV4Start)
	if p, ok := try(start, netip.MustParseAddr(autoV4End)); ok {
		return p, true
	}
	return try(space.Addr(), start)
}

// freeULA64 is a random /64, unused in the emulator, inside the ULA /48
// the organization's Private Networks draw from (fdXX:XXXX:XXXX::/48, derived
// from the organization ID).
func (st *state) freeULA64(orgID string) netip.Prefix {
	h := sha256.Sum256([]byte(orgID))
	var b [16]byte
	b[0] = 0xfd
	copy(b[1:6], h[:5])
	for {
		var r [2]byte
		_, _ = rand.Read(r[:]) // never fails (crypto/rand)
		b[6], b[7] = r[0], r[1]
		p := netip.PrefixFrom(netip.AddrFrom16(b), 64)
		if !st.prefixUsed(p) {
			return p
		}
	}
}

func (st *state) prefixUsed(p netip.Prefix) bool {
	for _, sn := range st.subnets {
		if sn.prefix == p {
			return true
		}
	}
	return false
}

func (api *vpcAPI) createPrivateNetwork(c *call) reply {
	var body struct {
		Name                           string   `json:"name"`
		ProjectID                      string   `json:"project_id"`
		Tags                           []string `json:"tags"`
		Subnets                        []string `json:"subnets"`
		VpcID                          *string  `json:"vpc_id"`
		DefaultRoutePropagationEnabled bool     `json:"default_route_propagation_enabled"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	spec := pnSpec{
		name: body.Name, projectID: body.ProjectID, tags: body.Tags, subnets: body.Subnets,
		defaultRoutes: body.DefaultRoutePropagationEnabled,
	}
	if body.VpcID != nil {
		spec.vpcID = *body.VpcID
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	pn, err := api.createPNLocked(spec, api.now())
	if err != nil {
		return errorReply(err)
	}
	return ok(pn.json(api.opts.Region))
}

func (api *vpcAPI) getPrivateNetwork(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	pn := api.st.pns[c.id]
	if pn == nil {
		return notFoundErr("private_network", c.id).reply()
	}
	return ok(pn.json(api.opts.Region))
}

func (api *vpcAPI) deletePrivateNetwork(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	pn := api.st.pns[c.id]
	if pn == nil {
		return notFoundErr("private_network", c.id).reply()
	}
	if pn.ipCount > 0 {
		// The recorded body, word for word.
		return preconditionErr(preconditionInUse, "Private Network must be empty to be deleted").reply()
	}
	for _, sn := range pn.subnets {
		delete(api.st.subnets, sn.id)
	}
	delete(api.st.pns, pn.id)
	delete(pn.vpc.pns, pn.id)
	return noContent()
}

func (api *vpcAPI) listPrivateNetworks(c *call) reply {
	q := c.query
	page, size, aerr := paging(q)
	if aerr != nil {
		return aerr.reply()
	}
	dhcp, aerr := optBool(q, "dhcp_enabled")
	if aerr != nil {
		return aerr.reply()
	}
	order, aerr := nameOrder(first(q, "order_by"))
	if aerr != nil {
		return aerr.reply()
	}
	name, projectID, orgID, vpcID := optString(q, "name"), optString(q, "project_id"), optString(q, "organization_id"), optString(q, "vpc_id")
	ids, tags := set(q, "private_network_ids"), q["tags"]

	api.mu.RLock()
	defer api.mu.RUnlock()
	var pns []*pnRec
	for _, pn := range api.st.pns {
		switch {
		case name != nil && !containsFold(pn.name, *name),
			projectID != nil && *projectID != pn.projectID,
			orgID != nil && *orgID != pn.orgID,
			vpcID != nil && *vpcID != pn.vpc.id,
			ids != nil && !ids[pn.id],
			len(tags) > 0 && !anyTag(pn.tags, tags),
			dhcp != nil && !*dhcp:
			continue
		}
		pns = append(pns, pn)
	}
	slices.SortFunc(pns, func(a, b *pnRec) int {
		return order(namedItem{a.name, a.createdAt, a.seq}, namedItem{b.name, b.createdAt, b.seq})
	})
	lo, hi := window(page, size, len(pns))
	out := struct {
		PrivateNetworks []pnJSON `json:"private_networks"`
		TotalCount      int      `json:"total_count"`
	}{PrivateNetworks: []pnJSON{}, TotalCount: len(pns)}
	for _, pn := range pns[lo:hi] {
		out.PrivateNetworks = append(out.PrivateNetworks, pn.json(api.opts.Region))
	}
	return ok(out)
}
