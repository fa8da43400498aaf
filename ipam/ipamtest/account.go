package ipamtest

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
func (a *accountAPI) createProject(c *call) reply {
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
		body.OrganizationID = a.opts.OrganizationID
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	p := &project{id: newID(), name: body.Name, orgID: body.OrganizationID, description: body.Description, createdAt: now, updatedAt: now}
	a.st.projects[p.id] = p
	return ok(p.json(false))
}

func (a *accountAPI) getProject(c *call) reply {
	a.mu.RLock()
	defer a.mu.RUnlock()
	p := a.st.projects[c.id]
	if p == nil {
		// The account API names the argument, not the kind (recorded).
		return notFoundErr("project_id", c.id).reply()
	}
	return ok(p.json(true))
}

// deleteProject refuses while the project owns Private Networks, IPs or VPCs
// other than its (empty) default one, which goes with it.
func (a *accountAPI) deleteProject(c *call) reply {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.st.projects[c.id]
	if p == nil {
		return notFoundErr("project_id", c.id).reply()
	}
	for _, v := range a.st.vpcs {
		if v.projectID == p.id && (!v.isDefault || len(v.pns) > 0) {
			return preconditionErr(preconditionInUse, "Project must be empty to be deleted").reply()
		}
	}
	for _, pn := range a.st.pns {
		if pn.projectID == p.id {
			return preconditionErr(preconditionInUse, "Project must be empty to be deleted").reply()
		}
	}
	if v := a.st.defaultVPC[p.id]; v != nil {
		delete(a.st.vpcs, v.id)
		delete(a.st.defaultVPC, p.id)
	}
	delete(a.st.projects, p.id)
	return noContent()
}
