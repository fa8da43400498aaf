package emulator

// accountAPI serves the Account API v3, its projects only: create, get and
// delete.
type accountAPI struct {
	*cloud
}

type projectJSON struct {
	CreatedAt      string             `json:"created_at"`
	Description    string             `json:"description"`
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	OrganizationID string             `json:"organization_id"`
	Qualification  *qualificationJSON `json:"qualification"`
	UpdatedAt      string             `json:"updated_at"`
}

type qualificationJSON struct {
	ArchitectureType string `json:"architecture_type"`
}

func (p *project) json(qualified bool) projectJSON {
	out := projectJSON{
		CreatedAt: ts(p.createdAt), Description: p.description, ID: p.id,
		Name: p.name, OrganizationID: p.orgID, UpdatedAt: ts(p.updatedAt),
	}
	if qualified {
		out.Qualification = &qualificationJSON{ArchitectureType: "unknown_architecture_type"}
	}
	return out
}

// createProject answers "qualification": null, as recorded: the account API
// qualifies a project after creating it, and a later GET shows it.
func (api *accountAPI) createProject(c *call) reply {
	var body struct {
		Name           string `json:"name"`
		OrganizationID string `json:"organization_id"`
		Description    string `json:"description"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if body.Name == "" {
		return errInvalidArguments("name", "name is required")
	}
	if body.OrganizationID == "" {
		body.OrganizationID = api.opts.OrganizationID
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	now := api.now()
	p := &project{id: newID(), name: body.Name, orgID: body.OrganizationID, description: body.Description, createdAt: now, updatedAt: now}
	api.st.projects[p.id] = p
	return ok(p.json(false))
}

func (api *accountAPI) getProject(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	p := api.st.projects[c.id]
	if p == nil {
		// The account API names the argument, not the kind (recorded).
		return notFoundErr("project_id", c.id).reply()
	}
	return ok(p.json(true))
}

// deleteProject refuses while the project owns Private Networks, IPs or VPCs
// other than its (empty) default one, which goes with it.
func (api *accountAPI) deleteProject(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	p := api.st.projects[c.id]
	if p == nil {
		return notFoundErr("project_id", c.id).reply()
	}
	for _, v := range api.st.vpcs {
		if v.projectID == p.id && (!v.isDefault || len(v.pns) > 0) {
			return preconditionErr(preconditionInUse, "Project must be empty to be deleted").reply()
		}
	}
	for _, pn := range api.st.pns {
		if pn.projectID == p.id {
			return preconditionErr(preconditionInUse, "Project must be empty to be deleted").reply()
		}
	}
	if v := api.st.defaultVPC[p.id]; v != nil {
		delete(api.st.vpcs, v.id)
		delete(api.st.defaultVPC, p.id)
	}
	delete(api.st.projects, p.id)
	return noContent()
}
