package emulator

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// The changes of IPs that more than one API makes: IPAM's handlers, the Load
// Balancer API's attachments and the Go API book, attach, detach and release
// through these, under cloud.mu, so that each checks and audits alike.

// booking is an IP asked for: by BookIP, by AddIP, or for a Load Balancer
// attached to a Private Network without a reserved IP.
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

// bookLocked books an IP as IPAM's BookIP does, refusing in the API's
// order: the source (a subnet of the family asked for), the project (the
// Private Network's), then the address.
func (cl *cloud) bookLocked(c *call, b booking, now time.Time) (*ipRecord, error) {
	cands, err := cl.st.bookingSource(b)
	if err != nil {
		return nil, err
	}
	pn := cands[0].pn
	if b.projectID != "" && b.projectID != pn.projectID {
		return nil, invalidArgumentErr("project_id", "project %s is not the project of Private Network %s (%s)", b.projectID, pn.id, pn.projectID)
	}
	sn, addr, err := b.address(cands)
	if err != nil {
		return nil, err
	}
	ip := &ipRecord{
		id: cmp.Or(b.id, newID()), seq: cl.st.nextSeq(), addr: addr, subnet: sn,
		projectID: pn.projectID, orgID: pn.orgID,
		tags: nonNil(b.tags), res: b.res, createdAt: now, updatedAt: now,
	}
	if ip.res != nil {
		ip.res.at = now
	}
	cl.st.indexIP(ip)
	cl.auditLocked(c, AuditBook, ip, nil, now)
	if ip.res != nil {
		cl.auditLocked(c, AuditAttach, ip, ip.res, now)
	}
	return ip, nil
}

// bookingSource is the subnets a booking may take an address from: the
// subnet it names, or those of its Private Network, of its family; all of
// one Private Network.
func (st *state) bookingSource(b booking) ([]*subnetRec, error) {
	if b.subnetID != "" {
		sn := st.subnets[b.subnetID]
		if sn == nil {
			return nil, notFoundErr("subnet", b.subnetID)
		}
		if sn.v6() != b.v6 {
			return nil, invalidArgumentErr("is_ipv6", "subnet %s (%s) is not of the family is_ipv6=%t asks for", sn.id, sn.prefix, b.v6)
		}
		return []*subnetRec{sn}, nil
	}
	pn := st.pns[b.pnID]
	if pn == nil {
		return nil, notFoundErr("private_network", b.pnID)
	}
	var cands []*subnetRec
	for _, sn := range pn.subnets {
		if sn.v6() == b.v6 {
			cands = append(cands, sn)
		}
	}
	if len(cands) == 0 {
		return nil, invalidArgumentErr("is_ipv6", "Private Network %s has no subnet of the family is_ipv6=%t asks for", pn.id, b.v6)
	}
	return cands, nil
}

// address is the address b asks for, once checked, or else the lowest free
// one of cands, in their order.
func (b booking) address(cands []*subnetRec) (*subnetRec, netip.Addr, error) {
	if b.addr.IsValid() {
		return b.requestedAddress(cands)
	}
	for _, sn := range cands {
		if a, ok := sn.lowestFree(); ok {
			return sn, a, nil
		}
	}
	return nil, netip.Addr{}, outOfStockErr("ip")
}

// requestedAddress checks the address b asks for: of its family, inside one
// of cands, not one IPAM keeps, and not booked.
func (b booking) requestedAddress(cands []*subnetRec) (*subnetRec, netip.Addr, error) {
	addr := b.addr.Unmap()
	if addr.Is6() != b.v6 {
		return nil, addr, invalidArgumentErr("address", "address %s is not of the family is_ipv6=%t asks for", addr, b.v6)
	}
	var sn *subnetRec
	for _, cand := range cands {
		if cand.prefix.Contains(addr) {
			sn = cand
			break
		}
	}
	switch {
	case sn == nil:
		return nil, addr, invalidArgumentErr("address", "address %s is outside the subnets of Private Network %s (%s)", addr, cands[0].pn.id, prefixList(cands))
	case !sn.bookable(addr):
		return nil, addr, invalidArgumentErr("address", "address %s is reserved: the first two and the last two addresses of subnet %s are never booked", addr, sn.prefix)
	case sn.used[addr] != nil:
		return nil, addr, alreadyExistsErr("ip", sn.used[addr].id, fmt.Sprintf("address %s is already booked in subnet %s", addr, sn.prefix))
	}
	return sn, addr, nil
}

func prefixList(sns []*subnetRec) string {
	out := make([]string, len(sns))
	for i, sn := range sns {
		out[i] = sn.prefix.String()
	}
	return strings.Join(out, ", ")
}

func (cl *cloud) releasableLocked(id string) (*ipRecord, error) {
	ip := cl.st.ips[id]
	if ip == nil {
		return nil, notFoundErr("ip", id)
	}
	if ip.res != nil {
		return nil, preconditionErr(preconditionInUse, "IP is attached to a resource, detach it first")
	}
	return ip, nil
}

func (cl *cloud) releaseLocked(c *call, ip *ipRecord) {
	cl.st.unindexIP(ip)
	cl.auditLocked(c, AuditRelease, ip, nil, cl.now())
}

func (cl *cloud) attachLocked(c *call, id string, a *attachment) (*ipRecord, error) {
	ip := cl.st.ips[id]
	if ip == nil {
		return nil, notFoundErr("ip", id)
	}
	if ip.res != nil {
		return nil, preconditionErr(preconditionInUse, fmt.Sprintf("IP is already attached to %s %s, detach it first", ip.res.typ, ip.res.id))
	}
	now := cl.now()
	a.at = now
	ip.res = a
	ip.updatedAt = now
	cl.auditLocked(c, AuditAttach, ip, a, now)
	return ip, nil
}

func (cl *cloud) detachLocked(c *call, ip *ipRecord) {
	now := cl.now()
	old := ip.res
	ip.res = nil
	ip.updatedAt = now
	cl.auditLocked(c, AuditDetach, ip, old, now)
}
