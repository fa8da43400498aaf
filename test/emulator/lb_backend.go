package emulator

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Backends of a Load Balancer: where it forwards (the nodes' addresses and
// port), with a health check. They belong to their Load Balancer and go with
// it; a frontend's backend cannot be deleted before the frontend.

// backendAPI serves the backends.
type backendAPI struct {
	*cloud
}

type backendRec struct {
	id                   string
	lb                   *lbRec
	settings             backendSettings
	healthCheck          map[string]any
	pool                 []string
	createdAt, updatedAt time.Time
	seq                  uint64
}

// backendSettings are what CreateBackend and UpdateBackend set, shown as
// given. The API shows unset optional numbers as null.
type backendSettings struct {
	FailoverHost             *string `json:"failover_host"`
	ForwardPort              int32   `json:"forward_port"`
	ForwardPortAlgorithm     string  `json:"forward_port_algorithm"`
	ForwardProtocol          string  `json:"forward_protocol"`
	IgnoreSSLServerVerify    *bool   `json:"ignore_ssl_server_verify"`
	MaxConnections           *int32  `json:"max_connections"`
	MaxRetries               *int32  `json:"max_retries"`
	Name                     string  `json:"name"`
	OnMarkedDownAction       string  `json:"on_marked_down_action"`
	ProxyProtocol            string  `json:"proxy_protocol"`
	RedispatchAttemptCount   *int32  `json:"redispatch_attempt_count"`
	SslBridging              bool    `json:"ssl_bridging"`
	StickySessions           string  `json:"sticky_sessions"`
	StickySessionsCookieName string  `json:"sticky_sessions_cookie_name"`
	TimeoutConnect           *int64  `json:"timeout_connect"`
	TimeoutQueue             *string `json:"timeout_queue"`
	TimeoutServer            *int64  `json:"timeout_server"`
	TimeoutTunnel            *int64  `json:"timeout_tunnel"`
}

// check refuses what the API refuses, and writes durations as it does.
func (s *backendSettings) check() *apiError {
	switch {
	case s.ForwardProtocol != "tcp" && s.ForwardProtocol != "http":
		return invalidArgumentErr("forward_protocol", "forward_protocol must be tcp or http, got %q", s.ForwardProtocol)
	case s.ForwardPort < 1 || s.ForwardPort > 65535:
		return invalidArgumentErr("forward_port", "forward_port must be between 1 and 65535, got %d", s.ForwardPort)
	}
	if s.TimeoutQueue != nil {
		d, err := protoDuration(*s.TimeoutQueue)
		if err != nil {
			return invalidArgumentErr("timeout_queue", "%v", err)
		}
		s.TimeoutQueue = &d
	}
	return nil
}

type backendJSON struct {
	backendSettings
	CreatedAt   string         `json:"created_at"`
	HealthCheck map[string]any `json:"health_check"`
	Host        string         `json:"host"`
	ID          string         `json:"id"`
	LB          lbJSON         `json:"lb"`
	Pool        []string       `json:"pool"`
	SendProxyV2 bool           `json:"send_proxy_v2"`
	UpdatedAt   string         `json:"updated_at"`
}

func (b *backendRec) json(v lbView) backendJSON {
	return backendJSON{
		backendSettings: b.settings, CreatedAt: ts(b.createdAt), HealthCheck: b.healthCheck,
		ID: b.id, LB: b.lb.json(v), Pool: nonNil(b.pool), UpdatedAt: ts(b.updatedAt),
	}
}

// backendLocked is the backend of the path.
func (cl *cloud) backendLocked(c *call) (*backendRec, *apiError) {
	return childLocked(cl, cl.st.backends, c, "backend", false)
}

func (api *backendAPI) createBackend(c *call) reply {
	var body struct {
		backendSettings
		HealthCheck json.RawMessage `json:"health_check"`
		ServerIP    []string        `json:"server_ip"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if aerr := body.check(); aerr != nil {
		return aerr.reply()
	}
	hc, aerr := healthCheck(body.HealthCheck)
	if aerr != nil {
		return aerr.reply()
	}
	pool, aerr := serverIPs(body.ServerIP)
	if aerr != nil {
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
	now := api.now()
	b := &backendRec{
		id: newID(), lb: lb, settings: body.backendSettings, healthCheck: hc, pool: pool,
		createdAt: now, updatedAt: now, seq: api.st.nextSeq(),
	}
	if b.settings.Name == "" {
		b.settings.Name = "backend-" + b.id[:8]
	}
	api.st.backends[b.id] = b
	lb.backends = append(lb.backends, b)
	lb.touch(now, api.opts.LBSettleDelay)
	return ok(b.json(api.view(true)))
}

func (api *backendAPI) getBackend(c *call) reply {
	api.mu.RLock()
	defer api.mu.RUnlock()
	b, aerr := api.backendLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	return ok(b.json(api.view(true)))
}

func (api *backendAPI) listBackends(c *call) reply {
	v := api.view(true)
	return listChildren(api.cloud, c, "backend", func(lb *lbRec) []*backendRec { return lb.backends }, func(r *backendRec) backendJSON { return r.json(v) })
}

// changeableBackendLocked is the backend of the path, refused while its
// Load Balancer is not ready.
func (api *backendAPI) changeableBackendLocked(c *call) (*backendRec, *apiError) {
	return childLocked(api.cloud, api.st.backends, c, "backend", true)
}

// updateBackend replaces the settings; the health check and the servers
// have calls of their own.
func (api *backendAPI) updateBackend(c *call) reply {
	var body backendSettings
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	if aerr := body.check(); aerr != nil {
		return aerr.reply()
	}
	return changeChild(api.cloud, api.st.backends, c, "backend", func(b *backendRec, now time.Time) (func() any, *apiError) {
		if body.Name == "" {
			body.Name = b.settings.Name
		}
		b.settings, b.updatedAt = body, now
		return func() any { return b.json(api.view(true)) }, nil
	})
}

func (api *backendAPI) setBackendServers(c *call) reply {
	var body struct {
		ServerIP []string `json:"server_ip"`
	}
	if rep := decodeBody(c, &body); rep != nil {
		return *rep
	}
	pool, aerr := serverIPs(body.ServerIP)
	if aerr != nil {
		return aerr.reply()
	}
	return changeChild(api.cloud, api.st.backends, c, "backend", func(b *backendRec, now time.Time) (func() any, *apiError) {
		b.pool, b.updatedAt = pool, now
		return func() any { return b.json(api.view(true)) }, nil
	})
}

func (api *backendAPI) updateHealthCheck(c *call) reply {
	hc, aerr := healthCheck(c.body)
	if aerr != nil {
		return aerr.reply()
	}
	return changeChild(api.cloud, api.st.backends, c, "backend", func(b *backendRec, _ time.Time) (func() any, *apiError) {
		b.healthCheck = hc
		return func() any { return hc }, nil
	})
}

// deleteBackend refuses a backend a frontend still uses.
func (api *backendAPI) deleteBackend(c *call) reply {
	api.mu.Lock()
	defer api.mu.Unlock()
	b, aerr := api.changeableBackendLocked(c)
	if aerr != nil {
		return aerr.reply()
	}
	for _, f := range b.lb.frontends {
		if f.backend == b {
			return preconditionErr(preconditionInUse, fmt.Sprintf("backend %s is used by frontend %s", b.id, f.id)).reply()
		}
	}
	delete(api.st.backends, b.id)
	b.lb.backends = slices.DeleteFunc(b.lb.backends, func(x *backendRec) bool { return x == b })
	b.lb.touch(api.now(), api.opts.LBSettleDelay)
	return noContent()
}

// serverIPs checks the backend's server addresses.
func serverIPs(ips []string) ([]string, *apiError) {
	for i, s := range ips {
		if _, err := netip.ParseAddr(s); err != nil {
			return nil, invalidArgumentErr(fmt.Sprintf("server_ip.%d", i), "%q is not an IP address", s)
		}
	}
	return nonNil(ips), nil
}
