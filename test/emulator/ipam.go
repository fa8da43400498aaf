package emulator

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// ipamAPI serves the IPAM API v1: booking, listing, updating, attaching and
// releasing IPs of Private Networks. Its Go API seeds IPs and attaches them
// as other products' APIs would.
type ipamAPI struct {
	*cloud
}

func (a *attachment) public() Resource {
	return Resource{Type: a.typ, ID: a.id, Name: a.name, MACAddress: a.mac}
}

func (ip *ipRecord) json(region string) ipJSON {
	out := ipJSON{
		Address:   netip.PrefixFrom(ip.addr, ip.subnet.prefix.Bits()).String(),
		CreatedAt: ts(ip.createdAt),
		ID:        ip.id,
		IsIPv6:    ip.addr.Is6(),
		ProjectID: ip.projectID,
		Region:    region,
		Reverses:  make([]reverseJSON, len(ip.reverses)),
		Source:    sourceJSON{SubnetID: ip.subnet.id},
		Tags:      nonNil(ip.tags),
		UpdatedAt: ts(ip.updatedAt),
	}
	for i, r := range ip.reverses {
		out.Reverses[i] = reverseJSON{Address: r.address.String(), Hostname: r.hostname}
	}
	if ip.res != nil {
		out.Resource = &resourceJSON{
			ID: ip.res.id, MacAddress: strPtrOrNil(ip.res.mac), Name: strPtrOrNil(ip.res.name), Type: ip.res.typ,
		}
	}
	return out
}

// --- handlers ---

func (api *ipamAPI) bookIP(c *call) reply {
	var body struct {
		ProjectID string `json:"project_id"`
		Source    *struct {
			PrivateNetworkID *string `json:"private_network_id"`
			SubnetID         *string `json:"subnet_id"`
			VpcID            *string `json:"vpc_id"`
			Zonal            *string `json:"zonal"`
			Regional         *bool   `json:"regional"`
		} `json:"source"`
		IsIPv6   bool                `json:"is_ipv6"`
		Address  *string             `json:"address"`
		Tags     []string            `json:"tags"`
		Resource *customResourceBody `json:"resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	b := booking{projectID: body.ProjectID, v6: body.IsIPv6, tags: body.Tags}
	switch src := body.Source; {
	case src == nil:
		return errInvalidArguments("source", "source is required")
	case src.PrivateNetworkID != nil && src.SubnetID == nil:
		b.pnID = *src.PrivateNetworkID
	case src.SubnetID != nil && src.PrivateNetworkID == nil:
		b.subnetID = *src.SubnetID
	default:
		// Zonal and regional sources hold public IPs, which cannot be
		// booked; a VPC source is not bookable either.
		return errInvalidArguments("source", "exactly one of source.private_network_id and source.subnet_id must be set")
	}
	if body.Address != nil {
		a, err := netip.ParseAddr(*body.Address)
		if err != nil {
			return errInvalidArguments("address", fmt.Sprintf("%q is not an IP address", *body.Address))
		}
		b.addr = a
	}
	if body.Resource != nil {
		a, aerr := body.Resource.attachment("resource")
		if aerr != nil {
			return aerr.reply()
		}
		b.res = a
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ip, err := api.bookLocked(c, b, api.now())
	if err != nil {
		return errorReply(err)
	}
	c.ipID = ip.id
	return ok(ip.json(api.opts.Region))
}

func (api *ipamAPI) getIP(c *call) reply {
	c.ipID = c.id
	api.mu.RLock()
	defer api.mu.RUnlock()
	ip := api.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	return ok(ip.json(api.opts.Region))
}

// ipUpdateBody is an UpdateIP body; raw fields tell absent and null
// (unchanged) from [] (cleared).
type ipUpdateBody struct {
	Tags     json.RawMessage `json:"tags"`
	Reverses json.RawMessage `json:"reverses"`
}

// ipUpdate is an UpdateIP body once its shapes are checked: nil tags and
// !setRevs leave them as they are.
type ipUpdate struct {
	tags    *[]string
	setRevs bool
	revs    []reverseBody
}

type reverseBody struct {
	Hostname string  `json:"hostname"`
	Address  *string `json:"address"`
}

// read checks the shapes of the fields set: tags a list of strings,
// reverses a list of {hostname, address}.
func (b ipUpdateBody) read() (ipUpdate, *apiError) {
	var u ipUpdate
	if isSet(b.Tags) {
		var t []string
		if err := json.Unmarshal(b.Tags, &t); err != nil {
			return u, invalidArgumentErr("tags", "tags must be a list of strings")
		}
		t = nonNil(t)
		u.tags = &t
	}
	u.setRevs = isSet(b.Reverses)
	if u.setRevs {
		if err := json.Unmarshal(b.Reverses, &u.revs); err != nil {
			return u, invalidArgumentErr("reverses", "reverses must be a list of {hostname, address}")
		}
	}
	return u, nil
}

// reverses checks u's reverses against ip: each names a hostname, and an
// address in ip's subnet (ip's own when it names none).
func (u ipUpdate) reverses(ip *ipRecord) ([]reverse, *apiError) {
	var out []reverse
	for i, r := range u.revs {
		if r.Hostname == "" {
			return nil, invalidArgumentErr(fmt.Sprintf("reverses.%d.hostname", i), "hostname is required")
		}
		a := ip.addr
		if r.Address != nil {
			pa, err := netip.ParseAddr(*r.Address)
			if err != nil || !ip.subnet.prefix.Contains(pa) {
				return nil, invalidArgumentErr(fmt.Sprintf("reverses.%d.address", i), "address %q is not in subnet %s", *r.Address, ip.subnet.prefix)
			}
			a = pa
		}
		out = append(out, reverse{hostname: r.Hostname, address: a})
	}
	return out, nil
}

func (api *ipamAPI) updateIP(c *call) reply {
	c.ipID = c.id
	var body ipUpdateBody
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	u, aerr := body.read()
	if aerr != nil {
		return aerr.reply()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ip := api.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	revs, aerr := u.reverses(ip)
	if aerr != nil {
		return aerr.reply()
	}
	now := api.now()
	if u.setRevs {
		ip.reverses = revs
	}
	ip.updatedAt = now
	if u.tags != nil {
		ip.tags = *u.tags
		api.auditLocked(c, AuditTags, ip, nil, now)
	}
	return ok(ip.json(api.opts.Region))
}

// isSet tells a JSON value from an absent one or null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func (api *ipamAPI) releaseIP(c *call) reply {
	c.ipID = c.id
	api.mu.Lock()
	defer api.mu.Unlock()
	ip, err := api.releasableLocked(c.id)
	if err != nil {
		return errorReply(err)
	}
	api.releaseLocked(c, ip)
	return noContent()
}

// releaseIPSet is all-or-nothing: every IP is checked (404 for the first
// unknown one, 412 for the first attached one) before any is released, so a
// refused call changes nothing.
func (api *ipamAPI) releaseIPSet(c *call) reply {
	var body struct {
		IPIDs []string `json:"ip_ids"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	var ips []*ipRecord
	seen := map[string]bool{}
	for _, id := range body.IPIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		ip, err := api.releasableLocked(id)
		if err != nil {
			return errorReply(err)
		}
		ips = append(ips, ip)
	}
	for _, ip := range ips {
		api.releaseLocked(c, ip)
	}
	return noContent()
}
