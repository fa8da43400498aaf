package ipamtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

// Resource is what an IP is attached to: a custom resource of the IPAM API,
// or any product resource (lb_server, instance_server, rdb_instance…) as the
// product's own API would attach it.
type Resource struct {
	Type       string // e.g. "lb_server"; "custom" when empty
	ID         string // generated when empty
	Name       string
	MACAddress string
}

// AuditKind is the kind of a state change.
type AuditKind string

// The state changes the audit log records.
const (
	AuditBook    AuditKind = "book"
	AuditRelease AuditKind = "release"
	AuditTags    AuditKind = "tags"
	AuditAttach  AuditKind = "attach"
	AuditDetach  AuditKind = "detach"
	// A Load Balancer was created or deleted: these events are about no
	// IP (IPID, Address, SubnetID and PrivateNetworkID are empty); LBID
	// names it. Deleting one with Private Networks attached first records
	// their detach (and release) events.
	AuditCreateLB AuditKind = "create_lb"
	AuditDeleteLB AuditKind = "delete_lb"
)

// AuditEvent is one change of an IP's state, or of a Load Balancer's
// existence (AuditCreateLB, AuditDeleteLB).
type AuditEvent struct {
	Time             time.Time
	Kind             AuditKind
	IPID             string
	Address          netip.Addr
	SubnetID         string
	PrivateNetworkID string
	// Tags of the IP after the change.
	Tags []string
	// Resource attached (attach) or detached (detach).
	Resource *Resource
	// Op is the HTTP operation that made the change; "" for the Go API
	// (AddIP, Attach, Detach).
	Op Op
	// LBID is the Load Balancer whose API call made the change (the IP it
	// was given or lost on a Private Network), or the one created or
	// deleted; "" for changes made through IPAM or the Go API.
	LBID string
	// AnswerLost: the change was made but the client was answered an error
	// or nothing (Fault.CommitThenFail).
	AnswerLost bool
}

// auditLocked records a change of ip; s.mu is held.
func (s *Server) auditLocked(c *call, kind AuditKind, ip *ipRecord, res *attachment, now time.Time) {
	ev := AuditEvent{
		Time: now, Kind: kind, IPID: ip.id, Address: ip.addr,
		SubnetID: ip.subnet.id, PrivateNetworkID: ip.subnet.pn.id,
		Tags: slices.Clone(ip.tags),
	}
	if res != nil {
		r := res.public()
		ev.Resource = &r
	}
	if c != nil {
		ev.Op, ev.AnswerLost, ev.LBID = c.op, c.lost, c.lbID
	}
	s.st.audit = append(s.st.audit, ev)
}

// auditLBLocked records the creation or deletion of a Load Balancer; s.mu
// is held.
func (s *Server) auditLBLocked(c *call, kind AuditKind, lbID string, now time.Time) {
	ev := AuditEvent{Time: now, Kind: kind, LBID: lbID}
	if c != nil {
		ev.Op, ev.AnswerLost = c.op, c.lost
	}
	s.st.audit = append(s.st.audit, ev)
}

// Audit is a copy of the audit log, oldest first.
func (s *Server) Audit() []AuditEvent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]AuditEvent, len(s.st.audit))
	for i, ev := range s.st.audit {
		ev.Tags = slices.Clone(ev.Tags)
		if ev.Resource != nil {
			r := *ev.Resource
			ev.Resource = &r
		}
		out[i] = ev
	}
	return out
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

// --- booking, shared by BookIP and AddIP ---

type booking struct {
	id        string // "": a new one
	projectID string
	pnID      string
	subnetID  string
	v6        bool
	addr      netip.Addr // zero: the lowest free one
	tags      []string
	res       *attachment
}

func (s *Server) bookLocked(c *call, b booking, now time.Time) (*ipRecord, error) {
	var cands []*subnetRec
	if b.subnetID != "" {
		sn := s.st.subnets[b.subnetID]
		if sn == nil {
			return nil, notFoundErr("subnet", b.subnetID)
		}
		if sn.v6() != b.v6 {
			return nil, invalidArgumentErr("is_ipv6", "subnet %s (%s) is not of the family is_ipv6=%t asks for", sn.id, sn.prefix, b.v6)
		}
		cands = []*subnetRec{sn}
	} else {
		pn := s.st.pns[b.pnID]
		if pn == nil {
			return nil, notFoundErr("private_network", b.pnID)
		}
		for _, sn := range pn.subnets {
			if sn.v6() == b.v6 {
				cands = append(cands, sn)
			}
		}
		if len(cands) == 0 {
			return nil, invalidArgumentErr("is_ipv6", "Private Network %s has no subnet of the family is_ipv6=%t asks for", pn.id, b.v6)
		}
	}
	pn := cands[0].pn
	if b.projectID != "" && b.projectID != pn.projectID {
		return nil, invalidArgumentErr("project_id", "project %s is not the project of Private Network %s (%s)", b.projectID, pn.id, pn.projectID)
	}

	var sn *subnetRec
	addr := b.addr
	if addr.IsValid() {
		addr = addr.Unmap()
		if addr.Is6() != b.v6 {
			return nil, invalidArgumentErr("address", "address %s is not of the family is_ipv6=%t asks for", addr, b.v6)
		}
		for _, cand := range cands {
			if cand.prefix.Contains(addr) {
				sn = cand
				break
			}
		}
		if sn == nil {
			return nil, invalidArgumentErr("address", "address %s is outside the subnets of Private Network %s (%s)", addr, pn.id, prefixList(cands))
		}
		if !sn.bookable(addr) {
			return nil, invalidArgumentErr("address", "address %s is reserved: the first two and the last two addresses of subnet %s are never booked", addr, sn.prefix)
		}
		if holder := sn.used[addr]; holder != nil {
			return nil, alreadyExistsErr("ip", holder.id, fmt.Sprintf("address %s is already booked in subnet %s", addr, sn.prefix))
		}
	} else {
		for _, cand := range cands {
			if a, ok := cand.lowestFree(); ok {
				sn, addr = cand, a
				break
			}
		}
		if sn == nil {
			return nil, outOfStockErr("ip")
		}
	}

	ip := &ipRecord{
		id: cmp.Or(b.id, newID()), seq: s.st.nextSeq(), addr: addr, subnet: sn,
		projectID: pn.projectID, orgID: pn.orgID,
		tags: nonNil(b.tags), res: b.res, createdAt: now, updatedAt: now,
	}
	if ip.res != nil {
		ip.res.at = now
	}
	s.st.indexIP(ip)
	s.auditLocked(c, AuditBook, ip, nil, now)
	if ip.res != nil {
		s.auditLocked(c, AuditAttach, ip, ip.res, now)
	}
	return ip, nil
}

func prefixList(sns []*subnetRec) string {
	out := make([]string, len(sns))
	for i, sn := range sns {
		out[i] = sn.prefix.String()
	}
	return strings.Join(out, ", ")
}

type customResourceBody struct {
	MacAddress string  `json:"mac_address"`
	Name       *string `json:"name"`
}

// attachment validates a custom resource of a request.
func (r *customResourceBody) attachment(arg string) (*attachment, *apiError) {
	if r == nil {
		return nil, invalidArgumentErr(arg, "%s is required", arg)
	}
	if _, err := net.ParseMAC(r.MacAddress); err != nil {
		return nil, invalidArgumentErr(arg+".mac_address", "%q is not a MAC address", r.MacAddress)
	}
	a := &attachment{typ: string(ipam.ResourceTypeCustom), id: newID(), mac: r.MacAddress}
	if r.Name != nil {
		a.name = *r.Name
	}
	return a, nil
}

func (r *customResourceBody) matches(a *attachment) bool {
	return r != nil && a != nil && a.typ == string(ipam.ResourceTypeCustom) && strings.EqualFold(r.MacAddress, a.mac)
}

// --- handlers ---

func (s *Server) bookIP(c *call) reply {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, err := s.bookLocked(c, b, s.now())
	if err != nil {
		return errorReply(err)
	}
	c.ipID = ip.id
	return ok(ip.json(s.opts.Region))
}

func (s *Server) getIP(c *call) reply {
	c.ipID = c.id
	s.mu.RLock()
	defer s.mu.RUnlock()
	ip := s.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	return ok(ip.json(s.opts.Region))
}

func (s *Server) updateIP(c *call) reply {
	c.ipID = c.id
	// Raw fields tell absent and null (unchanged) from [] (cleared).
	var body struct {
		Tags     json.RawMessage `json:"tags"`
		Reverses json.RawMessage `json:"reverses"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	var tags *[]string
	if isSet(body.Tags) {
		var t []string
		if err := json.Unmarshal(body.Tags, &t); err != nil {
			return errInvalidArguments("tags", "tags must be a list of strings")
		}
		t = nonNil(t)
		tags = &t
	}
	var revs []struct {
		Hostname string  `json:"hostname"`
		Address  *string `json:"address"`
	}
	setRevs := isSet(body.Reverses)
	if setRevs {
		if err := json.Unmarshal(body.Reverses, &revs); err != nil {
			return errInvalidArguments("reverses", "reverses must be a list of {hostname, address}")
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	ip := s.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	var newRevs []reverse
	for i, r := range revs {
		if r.Hostname == "" {
			return errInvalidArguments(fmt.Sprintf("reverses.%d.hostname", i), "hostname is required")
		}
		a := ip.addr
		if r.Address != nil {
			pa, err := netip.ParseAddr(*r.Address)
			if err != nil || !ip.subnet.prefix.Contains(pa) {
				return errInvalidArguments(fmt.Sprintf("reverses.%d.address", i), fmt.Sprintf("address %q is not in subnet %s", *r.Address, ip.subnet.prefix))
			}
			a = pa
		}
		newRevs = append(newRevs, reverse{hostname: r.Hostname, address: a})
	}
	now := s.now()
	if setRevs {
		ip.reverses = newRevs
	}
	ip.updatedAt = now
	if tags != nil {
		ip.tags = *tags
		s.auditLocked(c, AuditTags, ip, nil, now)
	}
	return ok(ip.json(s.opts.Region))
}

// isSet tells a JSON value from an absent one or null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func (s *Server) releaseIP(c *call) reply {
	c.ipID = c.id
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, err := s.releasableLocked(c.id)
	if err != nil {
		return errorReply(err)
	}
	s.releaseLocked(c, ip)
	return noContent()
}

func (s *Server) releasableLocked(id string) (*ipRecord, error) {
	ip := s.st.ips[id]
	if ip == nil {
		return nil, notFoundErr("ip", id)
	}
	if ip.res != nil {
		return nil, preconditionErr(preconditionInUse, "IP is attached to a resource, detach it first")
	}
	return ip, nil
}

func (s *Server) releaseLocked(c *call, ip *ipRecord) {
	s.st.unindexIP(ip)
	s.auditLocked(c, AuditRelease, ip, nil, s.now())
}

// releaseIPSet is all-or-nothing: every IP is checked (404 for the first
// unknown one, 412 for the first attached one) before any is released, so a
// refused call changes nothing.
func (s *Server) releaseIPSet(c *call) reply {
	var body struct {
		IPIDs []string `json:"ip_ids"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ips []*ipRecord
	seen := map[string]bool{}
	for _, id := range body.IPIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		ip, err := s.releasableLocked(id)
		if err != nil {
			return errorReply(err)
		}
		ips = append(ips, ip)
	}
	for _, ip := range ips {
		s.releaseLocked(c, ip)
	}
	return noContent()
}

func (s *Server) attachIP(c *call) reply {
	c.ipID = c.id
	var body struct {
		Resource *customResourceBody `json:"resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	a, aerr := body.Resource.attachment("resource")
	if aerr != nil {
		return aerr.reply()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, err := s.attachLocked(c, c.id, a)
	if err != nil {
		return errorReply(err)
	}
	return ok(ip.json(s.opts.Region))
}

func (s *Server) attachLocked(c *call, id string, a *attachment) (*ipRecord, error) {
	ip := s.st.ips[id]
	if ip == nil {
		return nil, notFoundErr("ip", id)
	}
	if ip.res != nil {
		return nil, preconditionErr(preconditionInUse, fmt.Sprintf("IP is already attached to %s %s, detach it first", ip.res.typ, ip.res.id))
	}
	now := s.now()
	a.at = now
	ip.res = a
	ip.updatedAt = now
	s.auditLocked(c, AuditAttach, ip, a, now)
	return ip, nil
}

func (s *Server) detachLocked(c *call, ip *ipRecord) {
	now := s.now()
	old := ip.res
	ip.res = nil
	ip.updatedAt = now
	s.auditLocked(c, AuditDetach, ip, old, now)
}

func (s *Server) detachIP(c *call) reply {
	c.ipID = c.id
	var body struct {
		Resource *customResourceBody `json:"resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.Resource == nil {
		return errInvalidArguments("resource", "resource is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := s.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	if !body.Resource.matches(ip.res) {
		return preconditionErr(preconditionNotUsable, notAttachedHelp(ip, body.Resource)).reply()
	}
	s.detachLocked(c, ip)
	return ok(ip.json(s.opts.Region))
}

func notAttachedHelp(ip *ipRecord, r *customResourceBody) string {
	switch {
	case ip.res == nil:
		return "IP is not attached to any resource"
	case ip.res.typ != string(ipam.ResourceTypeCustom):
		return fmt.Sprintf("IP is attached to %s %s, which only its product's API can detach", ip.res.typ, ip.res.id)
	}
	return fmt.Sprintf("IP is not attached to the custom resource with MAC address %s", r.MacAddress)
}

// moveIP detaches from from_resource and attaches to to_resource; without
// to_resource it only detaches.
func (s *Server) moveIP(c *call) reply {
	c.ipID = c.id
	var body struct {
		FromResource *customResourceBody `json:"from_resource"`
		ToResource   *customResourceBody `json:"to_resource"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.FromResource == nil {
		return errInvalidArguments("from_resource", "from_resource is required")
	}
	var to *attachment
	if body.ToResource != nil {
		a, aerr := body.ToResource.attachment("to_resource")
		if aerr != nil {
			return aerr.reply()
		}
		to = a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := s.st.ips[c.id]
	if ip == nil {
		return notFoundErr("ip", c.id).reply()
	}
	if !body.FromResource.matches(ip.res) {
		return preconditionErr(preconditionNotUsable, notAttachedHelp(ip, body.FromResource)).reply()
	}
	s.detachLocked(c, ip)
	if to != nil {
		if _, err := s.attachLocked(c, ip.id, to); err != nil {
			return errorReply(err)
		}
	}
	return ok(ip.json(s.opts.Region))
}

// --- ListIPs ---

type ipFilter struct {
	projectID, orgID, pnID, subnetID, vpcID, sourceVPCID *string
	zonal                                                *string
	regional                                             *bool
	ipIDs                                                map[string]bool
	tags                                                 []string
	attached, v6                                         *bool
	resID, resName, mac                                  *string
	resIDs, resTypes                                     map[string]bool
	resType                                              string
}

func parseIPFilter(q map[string][]string) (*ipFilter, *apiError) {
	f := &ipFilter{
		projectID: optString(q, "project_id"), orgID: optString(q, "organization_id"),
		pnID: optString(q, "private_network_id"), subnetID: optString(q, "subnet_id"),
		vpcID: optString(q, "vpc_id"), sourceVPCID: optString(q, "source_vpc_id"),
		zonal: optString(q, "zonal"),
		ipIDs: set(q, "ip_ids"), tags: q["tags"],
		resID: optString(q, "resource_id"), resName: optString(q, "resource_name"), mac: optString(q, "mac_address"),
		resIDs: set(q, "resource_ids"), resTypes: set(q, "resource_types"),
		resType: first(q, "resource_type"),
	}
	var err *apiError
	if f.regional, err = optBool(q, "regional"); err != nil {
		return nil, err
	}
	if f.attached, err = optBool(q, "attached"); err != nil {
		return nil, err
	}
	if f.v6, err = optBool(q, "is_ipv6"); err != nil {
		return nil, err
	}
	// The SDK always sends resource_type=unknown_type: no filter.
	if f.resType == string(ipam.ResourceTypeUnknownType) {
		f.resType = ""
	}
	delete(f.resTypes, string(ipam.ResourceTypeUnknownType))
	if len(f.resTypes) == 0 {
		f.resTypes = nil
	}
	return f, nil
}

func (f *ipFilter) match(ip *ipRecord) bool {
	eq := func(want *string, have string) bool { return want == nil || *want == have }
	pn := ip.subnet.pn
	switch {
	case !eq(f.projectID, ip.projectID), !eq(f.orgID, ip.orgID),
		!eq(f.pnID, pn.id), !eq(f.subnetID, ip.subnet.id),
		!eq(f.vpcID, pn.vpc.id), !eq(f.sourceVPCID, pn.vpc.id):
		return false
	case f.zonal != nil, f.regional != nil && *f.regional:
		// Every emulated IP comes from a Private Network: none is zonal
		// or regional (public).
		return false
	case f.ipIDs != nil && !f.ipIDs[ip.id]:
		return false
	case len(f.tags) > 0 && !anyTag(ip.tags, f.tags):
		return false
	case f.attached != nil && *f.attached != (ip.res != nil):
		return false
	case f.v6 != nil && *f.v6 != ip.addr.Is6():
		return false
	}
	needRes := f.resID != nil || f.resName != nil || f.mac != nil || f.resIDs != nil || f.resTypes != nil || f.resType != ""
	if !needRes {
		return true
	}
	r := ip.res
	if r == nil {
		return false
	}
	switch {
	case !eq(f.resID, r.id):
		return false
	case f.resIDs != nil && !f.resIDs[r.id]:
		return false
	case f.resType != "" && f.resType != r.typ:
		return false
	case f.resTypes != nil && !f.resTypes[r.typ]:
		return false
	case f.resName != nil && !strings.Contains(r.name, *f.resName):
		return false
	case f.mac != nil && !strings.EqualFold(*f.mac, r.mac):
		return false
	}
	return true
}

// ipOrder is the ListIPs sort key (ascending) named by key, nil when
// unknown; ties fall back to the booking order so that every order is total
// and deterministic.
func ipOrder(key string) func(a, b *ipRecord) int {
	switch key {
	case "created_at":
		return cmpCreated
	case "updated_at":
		return func(a, b *ipRecord) int { return a.updatedAt.Compare(b.updatedAt) }
	case "attached_at":
		return func(a, b *ipRecord) int { return attachedAt(a).Compare(attachedAt(b)) }
	case "ip_address":
		return func(a, b *ipRecord) int { return a.addr.Compare(b.addr) }
	case "mac_address":
		return func(a, b *ipRecord) int { return strings.Compare(strings.ToLower(mac(a)), strings.ToLower(mac(b))) }
	}
	return nil
}

func attachedAt(ip *ipRecord) time.Time {
	if ip.res == nil {
		return time.Time{}
	}
	return ip.res.at
}

func mac(ip *ipRecord) string {
	if ip.res == nil {
		return ""
	}
	return ip.res.mac
}

func (s *Server) listIPs(c *call) reply {
	f, aerr := parseIPFilter(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	page, size, aerr := paging(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	orderBy := first(c.query, "order_by")
	if orderBy == "" {
		orderBy = string(ipam.ListIPsRequestOrderByCreatedAtDesc)
	}
	key, desc := orderBy, false
	switch {
	case strings.HasSuffix(orderBy, "_desc"):
		key, desc = strings.TrimSuffix(orderBy, "_desc"), true
	case strings.HasSuffix(orderBy, "_asc"):
		key = strings.TrimSuffix(orderBy, "_asc")
	}
	cmpKey := ipOrder(key)
	if cmpKey == nil || key == orderBy {
		return errInvalidArguments("order_by", fmt.Sprintf("unknown order_by %q", orderBy))
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	lo := (page - 1) * size
	out := listIPsJSON{IPs: []ipJSON{}}
	if key == "created_at" {
		// byCreated is already in this order: one pass, no sort, and only
		// the page is encoded.
		n := len(s.st.byCreated)
		for i := range n {
			ip := s.st.byCreated[i]
			if desc {
				ip = s.st.byCreated[n-1-i]
			}
			if !f.match(ip) {
				continue
			}
			if out.TotalCount >= lo && out.TotalCount < lo+size {
				out.IPs = append(out.IPs, ip.json(s.opts.Region))
			}
			out.TotalCount++
		}
		return ok(out)
	}
	var matches []*ipRecord
	for _, ip := range s.st.byCreated {
		if f.match(ip) {
			matches = append(matches, ip)
		}
	}
	slices.SortFunc(matches, func(a, b *ipRecord) int {
		if desc {
			a, b = b, a
		}
		if c := cmpKey(a, b); c != 0 {
			return c
		}
		return cmpCreated(a, b)
	})
	out.TotalCount = len(matches)
	from, to := window(page, size, len(matches))
	for _, ip := range matches[from:to] {
		out.IPs = append(out.IPs, ip.json(s.opts.Region))
	}
	return ok(out)
}

// --- Go API: seeding, CCM-like attach, inspection ---

// AddIP books addr (the lowest free IPv4 address when addr is the zero
// Addr) in Private Network pnID for a holder other than the code under
// test: a VM, a database, another cluster. With res, the IP is attached to
// it. No HTTP: not counted, never faulted; the audit log records it.
func (s *Server) AddIP(pnID string, addr netip.Addr, tags []string, res *Resource) (string, error) {
	return s.AddIPWithID("", pnID, addr, tags, res)
}

// AddIPWithID is AddIP with the IP's ID chosen ("" for a new one), for
// fixtures that name it (the playground's bring-your-own example).
func (s *Server) AddIPWithID(id, pnID string, addr netip.Addr, tags []string, res *Resource) (string, error) {
	b := booking{id: id, pnID: pnID, addr: addr, tags: tags, v6: addr.IsValid() && addr.Unmap().Is6()}
	if res != nil {
		b.res = res.attachment()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.ips[id] != nil {
		return "", fmt.Errorf("adding IP %s: %w", id, alreadyExistsErr("ip", id, "an IP with this ID exists"))
	}
	ip, err := s.bookLocked(nil, b, s.now())
	if err != nil {
		return "", fmt.Errorf("adding IP %s to Private Network %s: %w", addr, pnID, err)
	}
	return ip.id, nil
}

func (r Resource) attachment() *attachment {
	a := &attachment{typ: r.Type, id: r.ID, name: r.Name, mac: r.MACAddress}
	if a.typ == "" {
		a.typ = string(ipam.ResourceTypeCustom)
	}
	if a.id == "" {
		a.id = newID()
	}
	return a
}

// Attach attaches IP ipID to r, as a product's API (e.g. the cloud
// controller attaching a load balancer to a Private Network) would.
func (s *Server) Attach(ipID string, r Resource) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.attachLocked(nil, ipID, r.attachment()); err != nil {
		return fmt.Errorf("attaching IP %s: %w", ipID, err)
	}
	return nil
}

// Detach detaches IP ipID from whatever it is attached to.
func (s *Server) Detach(ipID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := s.st.ips[ipID]
	if ip == nil {
		return fmt.Errorf("detaching IP %s: %w", ipID, notFoundErr("ip", ipID))
	}
	if ip.res == nil {
		return fmt.Errorf("detaching IP %s: %w", ipID, preconditionErr(preconditionNotUsable, "IP is not attached to any resource"))
	}
	s.detachLocked(nil, ip)
	return nil
}

// IP is a snapshot of IP id as the SDK would decode it.
func (s *Server) IP(id string) (ipam.IP, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ip := s.st.ips[id]
	if ip == nil {
		return ipam.IP{}, false
	}
	return s.sdkIP(ip), true
}

// IPs is a snapshot of every IP, oldest first.
func (s *Server) IPs() []ipam.IP {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ipam.IP, len(s.st.byCreated))
	for i, ip := range s.st.byCreated {
		out[i] = s.sdkIP(ip)
	}
	return out
}

func (s *Server) sdkIP(ip *ipRecord) ipam.IP {
	bits := ip.subnet.prefix.Bits()
	created, updated := ip.createdAt, ip.updatedAt
	subnetID := ip.subnet.id
	out := ipam.IP{
		ID: ip.id,
		Address: scw.IPNet{IPNet: net.IPNet{
			IP:   stdIP(ip.addr),
			Mask: net.CIDRMask(bits, ip.addr.BitLen()),
		}},
		ProjectID: ip.projectID,
		IsIPv6:    ip.addr.Is6(),
		CreatedAt: &created,
		UpdatedAt: &updated,
		Source:    &ipam.Source{SubnetID: &subnetID},
		Tags:      nonNil(ip.tags),
		Reverses:  make([]*ipam.Reverse, len(ip.reverses)),
		Region:    scw.Region(s.opts.Region),
	}
	for i, r := range ip.reverses {
		a := stdIP(r.address)
		out.Reverses[i] = &ipam.Reverse{Hostname: r.hostname, Address: &a}
	}
	if ip.res != nil {
		out.Resource = &ipam.Resource{
			Type: ipam.ResourceType(ip.res.typ), ID: ip.res.id,
			MacAddress: strPtrOrNil(ip.res.mac), Name: strPtrOrNil(ip.res.name),
		}
	}
	return out
}

// stdIP is a as the SDK decodes addresses: net.ParseIP's 16-byte form.
func stdIP(a netip.Addr) net.IP {
	return net.IP(a.AsSlice()).To16()
}
