package ipamtest

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

// getMetadata answers the API gateway's /metadata, which the SDK reads after
// its calls to build SRNs; it needs no authentication.
func (s *Server) getMetadata(*call) reply {
	return ok(map[string]string{"domain": "scw.cloud", "partition": "scw", "platform": "external"})
}

// createProject answers "qualification": null, as recorded: the account API
// qualifies a project after creating it, and a later GET shows it.
func (s *Server) createProject(c *call) reply {
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
		body.OrganizationID = s.opts.OrganizationID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	p := &project{id: newID(), name: body.Name, orgID: body.OrganizationID, description: body.Description, createdAt: now, updatedAt: now}
	s.st.projects[p.id] = p
	return ok(p.json(false))
}

func (s *Server) getProject(c *call) reply {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.st.projects[c.id]
	if p == nil {
		// The account API names the argument, not the kind (recorded).
		return notFoundErr("project_id", c.id).reply()
	}
	return ok(p.json(true))
}

// deleteProject refuses while the project owns Private Networks, IPs or VPCs
// other than its (empty) default one, which goes with it.
func (s *Server) deleteProject(c *call) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.projects[c.id]
	if p == nil {
		return notFoundErr("project_id", c.id).reply()
	}
	for _, v := range s.st.vpcs {
		if v.projectID == p.id && (!v.isDefault || len(v.pns) > 0) {
			return preconditionErr(preconditionInUse, "Project must be empty to be deleted").reply()
		}
	}
	for _, pn := range s.st.pns {
		if pn.projectID == p.id {
			return preconditionErr(preconditionInUse, "Project must be empty to be deleted").reply()
		}
	}
	if v := s.st.defaultVPC[p.id]; v != nil {
		delete(s.st.vpcs, v.id)
		delete(s.st.defaultVPC, p.id)
	}
	delete(s.st.projects, p.id)
	return noContent()
}
