package emulator

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// The Load Balancer API v1 (zoned), as far as the Scaleway
// cloud-controller-manager uses it: Load Balancers (lb*.go), their flexible
// IPs (lb_ip.go), frontends and ACLs (lb_frontend.go), backends
// (lb_backend.go) and attachments to Private Networks (lb_attach.go). How a
// Load Balancer comes up and settles after a change: lb_model.go.
//
// Deletion is asynchronous, as Scaleway's: DeleteLB answers 204 at once, and
// the Load Balancer then stays in status to_delete for
// Options.LBDeleteDelay, or longer while HoldLBDeletion holds it — still
// got, listed and attached to its Private Networks, so its IPs stay
// attached to it — before it is gone with its frontends and backends:
// detached, its DHCP IPs released, its reserved IPs left booked. The API
// refuses to change a Load Balancer that is not ready (being created or
// deleted). With no delay a deleted Load Balancer is gone at once.
//
// An attachment gives the Load Balancer one IPv4 address on the Private
// Network, held in IPAM as an IP attached to resource lb_server (the Load
// Balancer's ID and name, a generated MAC address): the reserved IP named
// by ipam_ids, or, without one, an IP booked for the attachment (DHCP) and
// released with it. IPAM reads the very same attachment, so GetIP and
// ListIPs show it.

// lbAPI serves the Load Balancers and their attachments. Its Go API lists
// the Load Balancers, holds a deletion, and reads one's audit trail.
type lbAPI struct {
	*cloud
}

// Defaults of a created Load Balancer. The API answers the type in lower
// case whatever the case asked (LB-S reads lb-s).
const (
	defaultLBType = "lb-s"
	defaultLBSSL  = "ssl_compatibility_level_intermediate"
	unknownLBSSL  = "ssl_compatibility_level_unknown"
)

// LB is a snapshot of an emulated Load Balancer.
type LB struct {
	ID, Name, Zone, ProjectID string
	// Status is to_create or creating until the Load Balancer is ready
	// (Options.LBCreateDelay), "ready", or "to_delete" once DeleteLB
	// accepted its deletion and until it is gone.
	Status string
	Tags   []string
	// PrivateNetworks maps the ID of each attached Private Network to the
	// IPAM ID of the Load Balancer's IP on it.
	PrivateNetworks map[string]string
	// FlexibleIPs are the addresses of its flexible IPs; none for a
	// private Load Balancer.
	FlexibleIPs []string
	// Frontends and Backends count its frontends and backends.
	Frontends, Backends int
}

func (cl *cloud) view(instances bool) lbView {
	return lbView{region: cl.opts.Region, now: cl.now(), instances: instances}
}

// lbOfLocked is Load Balancer id in zone.
func (cl *cloud) lbOfLocked(zone, id string) (*lbRec, *apiError) {
	lb := cl.st.lbs[id]
	if lb == nil || lb.zone != zone {
		return nil, lbNotFound("lbs", id)
	}
	return lb, nil
}

// changeableLocked refuses a change of a Load Balancer that is not ready.
//
// Scaleway's answer to a change of a Load Balancer in to_delete or being
// created was never recorded: this one is modelled on the API gateway's
// recorded transient_state body (409, the current state named), which
// scaleway-sdk-go reads as *scw.TransientStateError.
func (cl *cloud) changeableLocked(lb *lbRec) *apiError {
	now := cl.now()
	if lb.ready(now) {
		return nil
	}
	return &apiError{status: http.StatusConflict, kind: ErrPreconditionFailed, body: map[string]any{
		"current_state": lb.statusAt(now),
		"message":       "resource is in a transient state",
		"resource":      "lb",
		"resource_id":   lb.id,
		"type":          "transient_state",
	}}
}

// lbLocked is the Load Balancer of the path.
func (api *lbAPI) lbLocked(c *call) (*lbRec, *apiError) { return api.lbOfLocked(c.zone, c.id) }

// changeableLBLocked is the Load Balancer of the path, refused unless ready.
func (api *lbAPI) changeableLBLocked(c *call) (*lbRec, *apiError) {
	lb, err := api.lbLocked(c)
	if err != nil {
		return nil, err
	}
	if err := api.changeableLocked(lb); err != nil {
		return nil, err
	}
	return lb, nil
}

type createLBBody struct {
	ProjectID             *string  `json:"project_id"`
	OrganizationID        *string  `json:"organization_id"`
	Name                  string   `json:"name"`
	Description           string   `json:"description"`
	IPID                  *string  `json:"ip_id"`
	IPIDs                 []string `json:"ip_ids"`
	AssignFlexibleIP      *bool    `json:"assign_flexible_ip"`
	AssignFlexibleIPv6    *bool    `json:"assign_flexible_ipv6"`
	Tags                  []string `json:"tags"`
	Type                  string   `json:"type"`
	SslCompatibilityLevel string   `json:"ssl_compatibility_level"`
}

func (api *lbAPI) createLB(c *call) reply {
	var body createLBBody
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.Type == "" {
		return errInvalidArguments("type", "type is required")
	}
	projectID := api.opts.ProjectID
	if body.ProjectID != nil && *body.ProjectID != "" {
		projectID = *body.ProjectID
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	ips, aerr := api.flexIPsForLocked(&body, projectID, c.zone)
	if aerr != nil {
		return aerr.reply()
	}
	now := api.now()
	lb := &lbRec{
		id: newID(), name: body.Name, description: body.Description,
		projectID: projectID, orgID: api.projectOrgLocked(projectID),
		zone: c.zone, typ: strings.ToLower(body.Type), sslLevel: sslLevel(body.SslCompatibilityLevel), tags: nonNil(body.Tags),
		createdAt: now, updatedAt: now, seq: api.st.nextSeq(),
		readyAt: now.Add(api.opts.LBCreateDelay),
	}
	for _, ip := range ips {
		ip.lb = lb
	}
	lb.flexIPs = ips
	api.st.lbs[lb.id] = lb
	api.auditLBLocked(c, AuditCreateLB, lb.id, now)
	// The answer shows no instance: it is assigned right after.
	out := lb.json(lbView{region: api.opts.Region, now: now})
	lb.instanceID = newID()
	return ok(out)
}

func sslLevel(s string) string {
	if s == "" || s == unknownLBSSL {
		return defaultLBSSL
	}
	return s
}

// flexIPsForLocked are the flexible IPs a new Load Balancer gets: those
// named (free, of its zone), else a new IPv4 one (and an IPv6 one when
// asked) unless assign_flexible_ip is false.
func (api *lbAPI) flexIPsForLocked(body *createLBBody, projectID, zone string) ([]*flexIPRec, *apiError) {
	named := slices.Clone(body.IPIDs)
	if body.IPID != nil && *body.IPID != "" {
		named = append(named, *body.IPID)
	}
	var ips []*flexIPRec
	for _, id := range named {
		ip := api.st.flexIPs[id]
		switch {
		case ip == nil || ip.zone != zone:
			return nil, lbNotFound("ips", id)
		case ip.lb != nil:
			return nil, preconditionErr(preconditionInUse, "IP "+id+" is already used by Load Balancer "+ip.lb.id)
		}
		ips = append(ips, ip)
	}
	if len(ips) > 0 {
		return ips, nil
	}
	if body.AssignFlexibleIP == nil || *body.AssignFlexibleIP {
		ips = append(ips, api.newFlexIPLocked(projectID, zone, false, nil))
	}
	if body.AssignFlexibleIPv6 != nil && *body.AssignFlexibleIPv6 {
		ips = append(ips, api.newFlexIPLocked(projectID, zone, true, nil))
	}
	return ips, nil
}

func (api *lbAPI) getLB(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	lb, err := api.lbLocked(c)
	if err != nil {
		return err.reply()
	}
	return ok(lb.json(api.view(true)))
}

func (api *lbAPI) listLBs(c *call) reply {
	q := c.query
	page, size, aerr := paging(q)
	if aerr != nil {
		return aerr.reply()
	}
	order, aerr := nameOrder(first(q, "order_by"))
	if aerr != nil {
		return aerr.reply()
	}
	name, projectID, orgID := optString(q, "name"), optString(q, "project_id"), optString(q, "organization_id")
	lbIDs, tags := set(q, "lb_ids"), q["tags"]

	api.mu.RLock()
	defer api.mu.RUnlock()
	var lbs []*lbRec
	for _, lb := range api.st.lbs {
		switch {
		case lb.zone != c.zone,
			name != nil && !containsFold(lb.name, *name),
			projectID != nil && *projectID != lb.projectID,
			orgID != nil && *orgID != lb.orgID,
			lbIDs != nil && !lbIDs[lb.id],
			len(tags) > 0 && !anyTag(lb.tags, tags):
			continue
		}
		lbs = append(lbs, lb)
	}
	slices.SortFunc(lbs, func(a, b *lbRec) int {
		return order(namedItem{a.name, a.createdAt, a.seq}, namedItem{b.name, b.createdAt, b.seq})
	})
	lo, hi := window(page, size, len(lbs))
	out := struct {
		LBs        []lbJSON `json:"lbs"`
		TotalCount int      `json:"total_count"`
	}{LBs: []lbJSON{}, TotalCount: len(lbs)}
	v := api.view(true)
	for _, lb := range lbs[lo:hi] {
		out.LBs = append(out.LBs, lb.json(v))
	}
	return ok(out)
}

// deleteLB accepts the deletion: the Load Balancer goes to_delete and is
// removed LBDeleteDelay later (at once without a delay).
func (api *lbAPI) deleteLB(c *call) reply {
	release, aerr := optBool(c.query, "release_ip")
	if aerr != nil {
		return aerr.reply()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, err := api.lbLocked(c)
	if err != nil {
		return err.reply()
	}
	if lb.status == lbStatusToDelete {
		return api.changeableLocked(lb).reply()
	}
	c.lbID = lb.id
	now := api.now()
	lb.status, lb.updatedAt = lbStatusToDelete, now
	api.auditLBLocked(c, AuditDeleteLB, lb.id, now)
	releaseIPs := release != nil && *release
	if d := api.opts.LBDeleteDelay; d > 0 || lb.held != nil {
		go api.removeLBAfter(lb, d, releaseIPs)
	} else {
		api.removeLBLocked(c, lb, releaseIPs)
	}
	return noContent()
}

// removeLBAfter removes lb once d of real time has passed and no hold keeps
// it, unless the server is closed first.
func (api *lbAPI) removeLBAfter(lb *lbRec, d time.Duration, releaseIPs bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-api.done:
		return
	}
	api.mu.RLock()
	held := lb.held
	api.mu.RUnlock()
	if held != nil {
		select {
		case <-held:
		case <-api.done:
			return
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.st.lbs[lb.id] == lb {
		// The changes belong to the DeleteLB call that asked for them.
		api.removeLBLocked(&call{op: OpDeleteLB, lbID: lb.id}, lb, releaseIPs)
	}
}

// removeLBLocked ends a Load Balancer: every Private Network detached (its
// IPs detached, the DHCP ones released), its frontends and backends gone,
// its flexible IPs released or left detached, then it is gone.
func (api *lbAPI) removeLBLocked(c *call, lb *lbRec, releaseIPs bool) {
	for _, lp := range lb.pns {
		api.detachLBPNLocked(c, lp)
	}
	lb.pns = nil
	for _, f := range lb.frontends {
		delete(api.st.frontends, f.id)
	}
	for _, b := range lb.backends {
		delete(api.st.backends, b.id)
	}
	for _, ip := range lb.flexIPs {
		ip.lb = nil
		if releaseIPs {
			delete(api.st.flexIPs, ip.id)
		}
	}
	delete(api.st.lbs, lb.id)
	api.auditLBLocked(c, AuditLBGone, lb.id, api.now())
}
