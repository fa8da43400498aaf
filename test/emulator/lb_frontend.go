package emulator

import (
	"slices"
	"time"
)

// Frontends of a Load Balancer: a port it listens on and the backend of its
// own it forwards to. They belong to their Load Balancer and go with it;
// their ACLs (lb_acl.go) go with them.

// frontendAPI serves the frontends and their ACLs.
type frontendAPI struct {
	*cloud
}

type frontendRec struct {
	id                   string
	lb                   *lbRec
	backend              *backendRec
	settings             frontendSettings
	acls                 []*aclRec
	createdAt, updatedAt time.Time
	seq                  uint64
}

// frontendSettings are what CreateFrontend and UpdateFrontend set. The API
// shows an unset (or zero) timeout_client and connection_rate_limit as
// null.
type frontendSettings struct {
	CertificateIDs      []string `json:"certificate_ids"`
	ConnectionRateLimit *uint32  `json:"connection_rate_limit"`
	EnableAccessLogs    bool     `json:"enable_access_logs"`
	EnableHTTP3         bool     `json:"enable_http3"`
	InboundPort         int32    `json:"inbound_port"`
	Name                string   `json:"name"`
	TimeoutClient       *int64   `json:"timeout_client"`
}

type frontendBody struct {
	frontendSettings
	BackendID string `json:"backend_id"`
}

func (s *frontendSettings) check() *apiError {
	if s.InboundPort < 1 || s.InboundPort > 65535 {
		return invalidArgumentErr("inbound_port", "inbound_port must be between 1 and 65535, got %d", s.InboundPort)
	}
	if s.ConnectionRateLimit != nil && *s.ConnectionRateLimit == 0 {
		s.ConnectionRateLimit = nil
	}
	if s.TimeoutClient != nil && *s.TimeoutClient == 0 {
		s.TimeoutClient = nil
	}
	s.CertificateIDs = nonNil(s.CertificateIDs)
	return nil
}

type frontendJSON struct {
	frontendSettings
	Backend     backendJSON `json:"backend"`
	Certificate *struct{}   `json:"certificate"`
	CreatedAt   string      `json:"created_at"`
	ID          string      `json:"id"`
	LB          lbJSON      `json:"lb"`
	UpdatedAt   string      `json:"updated_at"`
}

// json shows the frontend; the API shows its Load Balancer's instances only
// in the answers to changes, and never its backend's.
func (f *frontendRec) json(v lbView) frontendJSON {
	inner := v
	inner.instances = false
	return frontendJSON{
		frontendSettings: f.settings, Backend: f.backend.json(inner), CreatedAt: ts(f.createdAt),
		ID: f.id, LB: f.lb.json(v), UpdatedAt: ts(f.updatedAt),
	}
}

// frontendLocked is the frontend of the path.
func (cl *cloud) frontendLocked(c *call) (*frontendRec, *apiError) {
	return childLocked(cl, cl.st.frontends, c, "frontend", false)
}

// frontendTargetLocked checks a frontend's backend and port on lb: the
// backend is lb's, and no other frontend of lb listens on the port.
func (cl *cloud) frontendTargetLocked(lb *lbRec, self *frontendRec, body *frontendBody) (*backendRec, *apiError) {
	b := cl.st.backends[body.BackendID]
	if b == nil || b.lb != lb {
		return nil, lbNotFound("backend", body.BackendID)
	}
	for _, f := range lb.frontends {
		if f != self && f.settings.InboundPort == body.InboundPort {
			return nil, alreadyExistsErr("frontend", f.id, "a frontend of this Load Balancer already listens on this port")
		}
	}
	return b, nil
}

func (api *frontendAPI) createFrontend(c *call) reply {
	var body frontendBody
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if aerr := body.check(); aerr != nil {
		return aerr.reply()
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	lb, aerr := api.lbOfLocked(c.zone, c.id)
	if aerr == nil {
		aerr = api.changeableLocked(lb)
	}
	if aerr != nil {
		return aerr.reply()
	}
	b, aerr := api.frontendTargetLocked(lb, nil, &body)
	if aerr != nil {
		return aerr.reply()
	}
	now := api.now()
	f := &frontendRec{
		id: newID(), lb: lb, backend: b, settings: body.frontendSettings,
		createdAt: now, updatedAt: now, seq: api.st.nextSeq(),
	}
	if f.settings.Name == "" {
		f.settings.Name = "frontend-" + f.id[:8]
	}
	api.st.frontends[f.id] = f
	lb.frontends = append(lb.frontends, f)
	lb.touch(now, api.opts.LBSettleDelay)
	return ok(f.json(api.view(true)))
}

func (api *frontendAPI) getFrontend(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	f, aerr := api.frontendLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	return ok(f.json(api.view(false)))
}

func (api *frontendAPI) listFrontends(c *call) reply {
	v := api.view(false)
	return listChildren(api.cloud, c, "frontend", func(lb *lbRec) []*frontendRec { return lb.frontends }, func(r *frontendRec) frontendJSON { return r.json(v) })
}

// changeableFrontendLocked is the frontend of the path, refused while its
// Load Balancer is not ready.
func (api *frontendAPI) changeableFrontendLocked(c *call) (*frontendRec, *apiError) {
	return childLocked(api.cloud, api.st.frontends, c, "frontend", true)
}

func (api *frontendAPI) updateFrontend(c *call) reply {
	var body frontendBody
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if aerr := body.check(); aerr != nil {
		return aerr.reply()
	}
	return changeChild(api.cloud, api.st.frontends, c, "frontend", func(f *frontendRec, now time.Time) (func() any, *apiError) {
		b, aerr := api.frontendTargetLocked(f.lb, f, &body)
		if aerr != nil {
			return nil, aerr
		}
		if body.Name == "" {
			body.Name = f.settings.Name
		}
		f.backend, f.settings, f.updatedAt = b, body.frontendSettings, now
		return func() any { return f.json(api.view(true)) }, nil
	})
}

func (api *frontendAPI) deleteFrontend(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	f, aerr := api.changeableFrontendLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	delete(api.st.frontends, f.id)
	f.lb.frontends = slices.DeleteFunc(f.lb.frontends, func(x *frontendRec) bool { return x == f })
	f.lb.touch(api.now(), api.opts.LBSettleDelay)
	return noContent()
}
