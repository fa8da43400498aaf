package scalewaytest

import (
	"net/http"
	"slices"
	"time"
)

// The Load Balancer API v1 (zoned), as far as a cloud controller uses it:
// Load Balancers and their attachments to Private Networks. Frontends,
// backends, flexible IPs and the like are not emulated. A Load Balancer and
// its attachments are "ready" at once.
//
// Deletion is asynchronous, as Scaleway's: DeleteLB answers 204 at once, and
// the Load Balancer then stays in status to_delete for
// Options.LBDeleteDelay, or longer while HoldLBDeletion holds it — still
// got, listed and attached to its Private Networks, so its IPs stay
// attached to it — before it is gone: detached, its DHCP IPs released, its
// reserved IPs left booked. The API refuses to
// change (attach, detach, delete) a Load Balancer that is being deleted.
// With no delay a deleted Load Balancer is gone at once.
//
// An attachment gives the Load Balancer one IPv4 address on the Private
// Network, held in IPAM as an IP attached to resource lb_server (the Load
// Balancer's ID and name, a generated MAC address): the reserved IP named
// by ipam_ids, or, without one, an IP booked for the attachment (DHCP) and
// released with it. IPAM reads the very same attachment, so GetIP and
// ListIPs show it.

// lbAPI serves the Load Balancer API v1 described above. Its Go API lists
// the Load Balancers, holds a deletion, and reads one's audit trail.
type lbAPI struct {
	*cloud
}

// Defaults of a created Load Balancer.
const (
	defaultLBType    = "LB-S"
	defaultLBSSL     = "ssl_compatibility_level_intermediate"
	unknownLBSSL     = "ssl_compatibility_level_unknown"
	lbStatusReady    = "ready"
	lbStatusToDelete = "to_delete"
	lbPNStatusReady  = "ready"
)

// LB is a snapshot of an emulated Load Balancer.
type LB struct {
	ID, Name, Zone, ProjectID string
	// Status is "ready", or "to_delete" once DeleteLB accepted its deletion
	// and until it is gone.
	Status string
	Tags   []string
	// PrivateNetworks maps the ID of each attached Private Network to the
	// IPAM ID of the Load Balancer's IP on it.
	PrivateNetworks map[string]string
}

type lbRec struct {
	id, name, description string
	projectID, orgID      string
	zone, typ, sslLevel   string
	status                string
	tags                  []string
	createdAt, updatedAt  time.Time
	seq                   uint64
	pns                   []*lbPNRec // in attach order
	// held, while not nil, keeps the Load Balancer to_delete past
	// LBDeleteDelay until it is closed (HoldLBDeletion).
	held chan struct{}
}

// lbPNRec is the attachment of a Load Balancer to a Private Network.
type lbPNRec struct {
	pn *pnRec
	ip *ipRecord
	// att is what the attachment attached ip to: detaching leaves alone an
	// IP that the Go API detached and attached to something else since.
	att *attachment
	// dhcp: ip was booked for the attachment (no ipam_ids) and goes with it.
	dhcp                 bool
	createdAt, updatedAt time.Time
}

func (lb *lbRec) attachment(pnID string) *lbPNRec {
	for _, lp := range lb.pns {
		if lp.pn.id == pnID {
			return lp
		}
	}
	return nil
}

// --- wire shapes, keys in alphabetical order ---

type lbJSON struct {
	BackendCount          int       `json:"backend_count"`
	CreatedAt             string    `json:"created_at"`
	Description           string    `json:"description"`
	FrontendCount         int       `json:"frontend_count"`
	ID                    string    `json:"id"`
	Instances             []any     `json:"instances"`
	IP                    []any     `json:"ip"`
	Name                  string    `json:"name"`
	OrganizationID        string    `json:"organization_id"`
	PrivateNetworkCount   int       `json:"private_network_count"`
	ProjectID             string    `json:"project_id"`
	Region                string    `json:"region"`
	RouteCount            int       `json:"route_count"`
	SslCompatibilityLevel string    `json:"ssl_compatibility_level"`
	Status                string    `json:"status"`
	Subscriber            *struct{} `json:"subscriber"`
	Tags                  []string  `json:"tags"`
	Type                  string    `json:"type"`
	UpdatedAt             string    `json:"updated_at"`
	Zone                  string    `json:"zone"`
}

func (lb *lbRec) json(region string) lbJSON {
	return lbJSON{
		CreatedAt:             ts(lb.createdAt),
		Description:           lb.description,
		ID:                    lb.id,
		Instances:             []any{},
		IP:                    []any{},
		Name:                  lb.name,
		OrganizationID:        lb.orgID,
		PrivateNetworkCount:   len(lb.pns),
		ProjectID:             lb.projectID,
		Region:                region,
		SslCompatibilityLevel: lb.sslLevel,
		Status:                lb.status,
		Tags:                  nonNil(lb.tags),
		Type:                  lb.typ,
		UpdatedAt:             ts(lb.updatedAt),
		Zone:                  lb.zone,
	}
}

// --- handlers ---

// lbLocked is the Load Balancer of the path, in the zone of the path.
func (api *lbAPI) lbLocked(c *call) (*lbRec, *apiError) {
	lb := api.st.lbs[c.id]
	if lb == nil || lb.zone != c.zone {
		return nil, notFoundErr("lb", c.id)
	}
	return lb, nil
}

func (api *lbAPI) createLB(c *call) reply {
	var body struct {
		ProjectID             *string  `json:"project_id"`
		OrganizationID        *string  `json:"organization_id"`
		Name                  string   `json:"name"`
		Description           string   `json:"description"`
		Tags                  []string `json:"tags"`
		Type                  string   `json:"type"`
		SslCompatibilityLevel string   `json:"ssl_compatibility_level"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	projectID := api.opts.ProjectID
	if body.ProjectID != nil && *body.ProjectID != "" {
		projectID = *body.ProjectID
	}
	typ := body.Type
	if typ == "" {
		typ = defaultLBType
	}
	ssl := body.SslCompatibilityLevel
	if ssl == "" || ssl == unknownLBSSL {
		ssl = defaultLBSSL
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	now := api.now()
	lb := &lbRec{
		id: newID(), name: body.Name, description: body.Description,
		projectID: projectID, orgID: api.projectOrgLocked(projectID),
		zone: c.zone, typ: typ, sslLevel: ssl, status: lbStatusReady, tags: nonNil(body.Tags),
		createdAt: now, updatedAt: now, seq: api.st.nextSeq(),
	}
	api.st.lbs[lb.id] = lb
	api.auditLBLocked(c, AuditCreateLB, lb.id, now)
	return ok(lb.json(api.opts.Region))
}

func (api *lbAPI) getLB(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	lb, err := api.lbLocked(c)
	if err != nil {
		return err.reply()
	}
	return ok(lb.json(api.opts.Region))
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
	for _, lb := range lbs[lo:hi] {
		out.LBs = append(out.LBs, lb.json(api.opts.Region))
	}
	return ok(out)
}

// deleteLB accepts the deletion: the Load Balancer goes to_delete and is
// removed LBDeleteDelay later (at once without a delay). release_ip is about
// flexible (public) IPs, which are not emulated.
func (api *lbAPI) deleteLB(c *call) reply {
	if _, aerr := optBool(c.query, "release_ip"); aerr != nil {
		return aerr.reply()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, err := api.changeableLBLocked(c)
	if err != nil {
		return err.reply()
	}
	c.lbID = lb.id
	now := api.now()
	lb.status, lb.updatedAt = lbStatusToDelete, now
	api.auditLBLocked(c, AuditDeleteLB, lb.id, now)
	if d := api.opts.LBDeleteDelay; d > 0 || lb.held != nil {
		go api.removeLBAfter(lb, d)
	} else {
		api.removeLBLocked(c, lb)
	}
	return noContent()
}

// removeLBAfter removes lb once d of real time has passed and no hold keeps
// it, unless the server is closed first.
func (api *lbAPI) removeLBAfter(lb *lbRec, d time.Duration) {
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
		api.removeLBLocked(&call{op: OpDeleteLB, lbID: lb.id}, lb)
	}
}

// removeLBLocked ends a Load Balancer: every Private Network detached (its
// IPs detached, the DHCP ones released), then gone.
func (api *lbAPI) removeLBLocked(c *call, lb *lbRec) {
	for len(lb.pns) > 0 {
		api.detachLBPNLocked(c, lb, lb.pns[0])
	}
	delete(api.st.lbs, lb.id)
	api.auditLBLocked(c, AuditLBGone, lb.id, api.now())
}

// changeableLBLocked is the Load Balancer of the path, refused while it is
// being deleted.
//
// Scaleway's answer to a change of a Load Balancer in to_delete was never
// recorded: this one is modelled on the API gateway's recorded
// transient_state body (409, the current state named), which
// scaleway-sdk-go reads as *scw.TransientStateError.
func (api *lbAPI) changeableLBLocked(c *call) (*lbRec, *apiError) {
	lb, err := api.lbLocked(c)
	if err != nil {
		return nil, err
	}
	if lb.status == lbStatusToDelete {
		return nil, &apiError{status: http.StatusConflict, kind: ErrPreconditionFailed, body: map[string]any{
			"current_state": lb.status,
			"message":       "resource is in a transient state",
			"resource":      "lb",
			"resource_id":   lb.id,
			"type":          "transient_state",
		}}
	}
	return lb, nil
}
