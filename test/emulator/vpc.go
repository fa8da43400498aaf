package emulator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// vpcAPI serves the VPC API v2: VPCs, Private Networks and their subnets.
// Its Go API seeds Private Networks.
type vpcAPI struct {
	*cloud
}

func (v *vpcRec) json(region string) vpcJSON {
	return vpcJSON{
		CreatedAt:                      ts(v.createdAt),
		CustomRoutesPropagationEnabled: v.customRoutes,
		ID:                             v.id,
		IsDefault:                      v.isDefault,
		Name:                           v.name,
		OrganizationID:                 v.orgID,
		PrivateNetworkCount:            len(v.pns),
		ProjectID:                      v.projectID,
		Region:                         region,
		// Routing is always on: the API enables it whatever enable_routing
		// says (recorded).
		RoutingEnabled:       true,
		S3IntegrationEnabled: false,
		Tags:                 nonNil(v.tags),
		TransitivityEnabled:  v.transitivity,
		UpdatedAt:            ts(v.updatedAt),
	}
}

func (api *vpcAPI) newVPCLocked(name, projectID string, tags []string, transitivity, isDefault bool, now time.Time) *vpcRec {
	v := &vpcRec{
		id: newID(), name: name, projectID: projectID, orgID: api.projectOrgLocked(projectID),
		tags: nonNil(tags), isDefault: isDefault,
		// Recent recordings show new VPCs with custom routes propagation on.
		customRoutes: true, transitivity: transitivity,
		createdAt: now, updatedAt: now, seq: api.st.nextSeq(), pns: map[string]*pnRec{},
	}
	if v.name == "" {
		v.name = "vpc-" + v.id[:8]
	}
	api.st.vpcs[v.id] = v
	return v
}

// defaultVPCLocked is the project's default VPC, created on first use.
func (api *vpcAPI) defaultVPCLocked(projectID string, now time.Time) *vpcRec {
	if v := api.st.defaultVPC[projectID]; v != nil {
		return v
	}
	v := api.newVPCLocked("default", projectID, nil, false, true, now)
	api.st.defaultVPC[projectID] = v
	return v
}

func (api *vpcAPI) createVPC(c *call) reply {
	var body struct {
		Name               string   `json:"name"`
		ProjectID          string   `json:"project_id"`
		Tags               []string `json:"tags"`
		EnableRouting      bool     `json:"enable_routing"`
		EnableTransitivity bool     `json:"enable_transitivity"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.ProjectID == "" {
		body.ProjectID = api.opts.ProjectID
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	v := api.newVPCLocked(body.Name, body.ProjectID, body.Tags, body.EnableTransitivity, false, api.now())
	return ok(v.json(api.opts.Region))
}

func (api *vpcAPI) getVPC(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	v := api.st.vpcs[c.id]
	if v == nil {
		return notFoundErr("vpc", c.id).reply()
	}
	return ok(v.json(api.opts.Region))
}

func (api *vpcAPI) deleteVPC(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	v := api.st.vpcs[c.id]
	if v == nil {
		return notFoundErr("vpc", c.id).reply()
	}
	if len(v.pns) > 0 {
		// Shaped like the recorded refusal to delete a non-empty Private
		// Network.
		return preconditionErr(preconditionInUse, "VPC must be empty to be deleted").reply()
	}
	delete(api.st.vpcs, v.id)
	if api.st.defaultVPC[v.projectID] == v {
		delete(api.st.defaultVPC, v.projectID)
	}
	return noContent()
}

func (api *vpcAPI) enableCustomRoutesPropagation(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	v := api.st.vpcs[c.id]
	if v == nil {
		return notFoundErr("vpc", c.id).reply()
	}
	v.customRoutes = true
	v.updatedAt = api.now()
	return ok(v.json(api.opts.Region))
}

func (api *vpcAPI) listVPCs(c *call) reply {
	q := c.query
	page, size, aerr := paging(q)
	if aerr != nil {
		return aerr.reply()
	}
	isDefault, aerr := optBool(q, "is_default")
	if aerr != nil {
		return aerr.reply()
	}
	routing, aerr := optBool(q, "routing_enabled")
	if aerr != nil {
		return aerr.reply()
	}
	order, aerr := nameOrder(first(q, "order_by"))
	if aerr != nil {
		return aerr.reply()
	}
	name, projectID, orgID, tags := optString(q, "name"), optString(q, "project_id"), optString(q, "organization_id"), q["tags"]

	api.mu.RLock()
	defer api.mu.RUnlock()
	var vs []*vpcRec
	for _, v := range api.st.vpcs {
		switch {
		case name != nil && !containsFold(v.name, *name),
			projectID != nil && *projectID != v.projectID,
			orgID != nil && *orgID != v.orgID,
			len(tags) > 0 && !anyTag(v.tags, tags),
			isDefault != nil && *isDefault != v.isDefault,
			routing != nil && !*routing:
			continue
		}
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b *vpcRec) int {
		return order(namedItem{a.name, a.createdAt, a.seq}, namedItem{b.name, b.createdAt, b.seq})
	})
	lo, hi := window(page, size, len(vs))
	out := struct {
		TotalCount int       `json:"total_count"`
		Vpcs       []vpcJSON `json:"vpcs"`
	}{TotalCount: len(vs), Vpcs: []vpcJSON{}}
	for _, v := range vs[lo:hi] {
		out.Vpcs = append(out.Vpcs, v.json(api.opts.Region))
	}
	return ok(out)
}

type namedItem struct {
	name    string
	created time.Time
	seq     uint64
}

// nameOrder is the order_by of VPC and Private Network lists (default
// created_at_asc).
func nameOrder(orderBy string) (func(a, b namedItem) int, *apiError) {
	byCreated := func(a, b namedItem) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	}
	byName := func(a, b namedItem) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return byCreated(a, b)
	}
	switch orderBy {
	case "", "created_at_asc":
		return byCreated, nil
	case "created_at_desc":
		return func(a, b namedItem) int { return byCreated(b, a) }, nil
	case "name_asc":
		return byName, nil
	case "name_desc":
		return func(a, b namedItem) int { return byName(b, a) }, nil
	}
	return nil, invalidArgumentErr("order_by", "unknown order_by %q", orderBy)
}

// --- subnets ---

// listSubnets also filters on private_network_id, which the SDK does not
// send, for callers going around it.
func (api *vpcAPI) listSubnets(c *call) reply {
	q := c.query
	page, size, aerr := paging(q)
	if aerr != nil {
		return aerr.reply()
	}
	desc := false
	switch ob := first(q, "order_by"); ob {
	case "", "created_at_asc":
	case "created_at_desc":
		desc = true
	default:
		return errInvalidArguments("order_by", fmt.Sprintf("unknown order_by %q", ob))
	}
	projectID, orgID, vpcID, pnID := optString(q, "project_id"), optString(q, "organization_id"), optString(q, "vpc_id"), optString(q, "private_network_id")
	ids := set(q, "subnet_ids")

	api.mu.RLock()
	defer api.mu.RUnlock()
	var sns []*subnetRec
	for _, sn := range api.st.subnets {
		switch {
		case projectID != nil && *projectID != sn.pn.projectID,
			orgID != nil && *orgID != sn.pn.orgID,
			vpcID != nil && *vpcID != sn.pn.vpc.id,
			pnID != nil && *pnID != sn.pn.id,
			ids != nil && !ids[sn.id]:
			continue
		}
		sns = append(sns, sn)
	}
	slices.SortFunc(sns, func(a, b *subnetRec) int {
		if desc {
			a, b = b, a
		}
		if c := a.createdAt.Compare(b.createdAt); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	lo, hi := window(page, size, len(sns))
	out := struct {
		Subnets    []subnetJSON `json:"subnets"`
		TotalCount int          `json:"total_count"`
	}{Subnets: []subnetJSON{}, TotalCount: len(sns)}
	for _, sn := range sns[lo:hi] {
		out.Subnets = append(out.Subnets, sn.json(api.opts.Region))
	}
	return ok(out)
}
