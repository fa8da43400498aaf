package emulator

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Flexible IPs: the public addresses of the Load Balancer API (lb/v1
// zones/{zone}/ips), unrelated to IPAM. CreateLB books one unless it is given
// some (ip_id, ip_ids) or told not to (assign_flexible_ip false, a private
// Load Balancer); DeleteLB releases them with release_ip=true and leaves them
// booked, detached, without.

// lbIPAPI serves the flexible IPs.
type lbIPAPI struct {
	*cloud
}

type flexIPRec struct {
	id, projectID, orgID, zone string
	addr                       netip.Addr
	tags                       []string
	lb                         *lbRec // nil when detached
	seq                        uint64
}

type flexIPJSON struct {
	ID             string   `json:"id"`
	IPAddress      string   `json:"ip_address"`
	LBID           *string  `json:"lb_id"`
	OrganizationID string   `json:"organization_id"`
	ProjectID      string   `json:"project_id"`
	Region         string   `json:"region"`
	Reverse        string   `json:"reverse"`
	Tags           []string `json:"tags"`
	Zone           string   `json:"zone"`
}

func (ip *flexIPRec) json(region string) flexIPJSON {
	var lbID *string
	if ip.lb != nil {
		lbID = &ip.lb.id
	}
	return flexIPJSON{
		ID: ip.id, IPAddress: ip.addr.String(), LBID: lbID, OrganizationID: ip.orgID, ProjectID: ip.projectID,
		Region: region, Reverse: flexReverse(ip.addr, region), Tags: nonNil(ip.tags), Zone: ip.zone,
	}
}

// flexReverse is the reverse DNS name Scaleway gives a flexible IP:
// 212-47-249-158.lb.fr-par.scw.cloud.
func flexReverse(a netip.Addr, region string) string {
	s := a.String()
	if a.Is6() {
		s = strings.ReplaceAll(s, ":", "-")
	} else {
		s = strings.ReplaceAll(s, ".", "-")
	}
	return s + ".lb." + region + ".scw.cloud"
}

// newFlexIPLocked books a flexible IP: public-looking addresses from
// 51.158.0.0/16 (IPv4) or 2001:bc8:1640::/48 (IPv6), never reused.
func (cl *cloud) newFlexIPLocked(projectID, zone string, v6 bool, tags []string) *flexIPRec {
	n := cl.st.nextSeq()
	addr := netip.AddrFrom4([4]byte{51, 158, byte(n >> 8), byte(n)})
	if v6 {
		addr = netip.MustParseAddr(fmt.Sprintf("2001:bc8:1640::%x", n))
	}
	ip := &flexIPRec{
		id: newID(), projectID: projectID, orgID: cl.projectOrgLocked(projectID), zone: zone,
		addr: addr, tags: nonNil(tags), seq: n,
	}
	cl.st.flexIPs[ip.id] = ip
	return ip
}

func (api *lbIPAPI) createIP(c *call) reply {
	var body struct {
		ProjectID *string  `json:"project_id"`
		IsIPv6    bool     `json:"is_ipv6"`
		Tags      []string `json:"tags"`
		Reverse   *string  `json:"reverse"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	projectID := api.opts.ProjectID
	if body.ProjectID != nil && *body.ProjectID != "" {
		projectID = *body.ProjectID
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ip := api.newFlexIPLocked(projectID, c.zone, body.IsIPv6, body.Tags)
	return ok(ip.json(api.opts.Region))
}

// flexIPLocked is the flexible IP of the path; a missing one answers as the
// API's gateway does for this resource.
func (api *lbIPAPI) flexIPLocked(c *call) (*flexIPRec, *reply) {
	ip := api.st.flexIPs[c.id]
	if ip == nil || ip.zone != c.zone {
		rep := lbNotFound("ips", c.id).reply()
		return nil, &rep
	}
	return ip, nil
}

func (api *lbIPAPI) getIP(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	ip, rep := api.flexIPLocked(c)
	if rep != nil {
		return *rep
	}
	return ok(ip.json(api.opts.Region))
}

// deleteIP releases a flexible IP; one a Load Balancer uses is refused.
func (api *lbIPAPI) deleteIP(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	ip, rep := api.flexIPLocked(c)
	if rep != nil {
		return *rep
	}
	if ip.lb != nil {
		return preconditionErr(preconditionInUse, fmt.Sprintf("IP %s is used by Load Balancer %s", ip.id, ip.lb.id)).reply()
	}
	delete(api.st.flexIPs, ip.id)
	return noContent()
}

func (api *lbIPAPI) listIPs(c *call) reply {
	page, size, aerr := paging(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	addr, projectID := optString(c.query, "ip_address"), optString(c.query, "project_id")
	api.mu.RLock()
	defer api.mu.RUnlock()
	var ips []*flexIPRec
	for _, ip := range api.st.flexIPs {
		switch {
		case ip.zone != c.zone,
			addr != nil && *addr != ip.addr.String(),
			projectID != nil && *projectID != ip.projectID:
			continue
		}
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, func(a, b *flexIPRec) int { return int(a.seq) - int(b.seq) })
	lo, hi := window(page, size, len(ips))
	out := struct {
		IPs        []flexIPJSON `json:"ips"`
		TotalCount int          `json:"total_count"`
	}{IPs: []flexIPJSON{}, TotalCount: len(ips)}
	for _, ip := range ips[lo:hi] {
		out.IPs = append(out.IPs, ip.json(api.opts.Region))
	}
	return ok(out)
}

// lbNotFound is the Load Balancer API's 404 for a missing object of a
// path, as recorded: its gateway answers {"message":"lbs not Found"} (or
// "backend not Found", "frontend not Found"), without the common
// not_found fields.
func lbNotFound(what, id string) *apiError {
	return &apiError{status: http.StatusNotFound, kind: ErrNotFound, id: id, body: map[string]any{"message": what + " not Found"}}
}
