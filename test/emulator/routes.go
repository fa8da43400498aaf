package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// handler answers one call; each is a method of the type of its API.
type handler func(c *call) reply

type route struct {
	method string
	segs   []string
	op     Op
	h      handler
}

// routeEntry is one line of a routing table.
type routeEntry struct {
	method, pattern string
	op              Op
	h               handler
}

// apis are the emulated APIs, one type each.
type apis struct {
	ipam     *ipamAPI
	vpc      *vpcAPI
	account  *accountAPI
	lb       *lbAPI
	lbIP     *lbIPAPI
	frontend *frontendAPI
	backend  *backendAPI
}

func buildRoutes(a apis) []route {
	table := slices.Concat(ipamVPCRoutes(a), lbRoutes(a))
	routes := make([]route, len(table))
	for i, e := range table {
		routes[i] = route{method: e.method, segs: strings.Split(e.pattern, "/"), op: e.op, h: e.h}
	}
	return routes
}

func ipamVPCRoutes(a apis) []routeEntry {
	const (
		ipamR = "ipam/v1/regions/{region}/"
		vpcR  = "vpc/v2/regions/{region}/"
		acct  = "account/v3/"
	)
	ipam, vpc, account := a.ipam, a.vpc, a.account
	return []routeEntry{
		{"GET", "metadata", OpMetadata, getMetadata},

		{"POST", ipamR + "ips", OpBookIP, ipam.bookIP},
		{"GET", ipamR + "ips", OpListIPs, ipam.listIPs},
		{"GET", ipamR + "ips/{id}", OpGetIP, ipam.getIP},
		{"PATCH", ipamR + "ips/{id}", OpUpdateIP, ipam.updateIP},
		{"DELETE", ipamR + "ips/{id}", OpReleaseIP, ipam.releaseIP},
		{"POST", ipamR + "ips/{id}/attach", OpAttachIP, ipam.attachIP},
		{"POST", ipamR + "ips/{id}/detach", OpDetachIP, ipam.detachIP},
		{"POST", ipamR + "ips/{id}/move", OpMoveIP, ipam.moveIP},
		{"POST", ipamR + "ip-sets/release", OpReleaseIPSet, ipam.releaseIPSet},

		{"POST", vpcR + "vpcs", OpCreateVPC, vpc.createVPC},
		{"GET", vpcR + "vpcs", OpListVPCs, vpc.listVPCs},
		{"GET", vpcR + "vpcs/{id}", OpGetVPC, vpc.getVPC},
		{"DELETE", vpcR + "vpcs/{id}", OpDeleteVPC, vpc.deleteVPC},
		{"POST", vpcR + "vpcs/{id}/enable-custom-routes-propagation", OpEnableCustomRoutesPropagation, vpc.enableCustomRoutesPropagation},
		{"POST", vpcR + "private-networks", OpCreatePrivateNetwork, vpc.createPrivateNetwork},
		{"GET", vpcR + "private-networks", OpListPrivateNetworks, vpc.listPrivateNetworks},
		{"GET", vpcR + "private-networks/{id}", OpGetPrivateNetwork, vpc.getPrivateNetwork},
		{"DELETE", vpcR + "private-networks/{id}", OpDeletePrivateNetwork, vpc.deletePrivateNetwork},
		{"GET", vpcR + "subnets", OpListSubnets, vpc.listSubnets},

		{"POST", acct + "projects", OpCreateProject, account.createProject},
		{"GET", acct + "projects/{id}", OpGetProject, account.getProject},
		{"DELETE", acct + "projects/{id}", OpDeleteProject, account.deleteProject},
	}
}

func lbRoutes(a apis) []routeEntry {
	const lbZ = "lb/v1/zones/{zone}/"
	lb, ip, fe, be := a.lb, a.lbIP, a.frontend, a.backend
	return []routeEntry{
		{"POST", lbZ + "lbs", OpCreateLB, lb.createLB},
		{"GET", lbZ + "lbs", OpListLBs, lb.listLBs},
		{"GET", lbZ + "lbs/{id}", OpGetLB, lb.getLB},
		{"PUT", lbZ + "lbs/{id}", OpUpdateLB, lb.updateLB},
		{"DELETE", lbZ + "lbs/{id}", OpDeleteLB, lb.deleteLB},
		{"POST", lbZ + "lbs/{id}/migrate", OpMigrateLB, lb.migrateLB},
		{"POST", lbZ + "lbs/{id}/attach-private-network", OpAttachLBPrivateNetwork, lb.attachLBPrivateNetwork},
		{"POST", lbZ + "lbs/{id}/detach-private-network", OpDetachLBPrivateNetwork, lb.detachLBPrivateNetwork},
		{"GET", lbZ + "lbs/{id}/private-networks", OpListLBPrivateNetworks, lb.listLBPrivateNetworks},

		{"POST", lbZ + "ips", OpCreateLBIP, ip.createIP},
		{"GET", lbZ + "ips", OpListLBIPs, ip.listIPs},
		{"GET", lbZ + "ips/{id}", OpGetLBIP, ip.getIP},
		{"DELETE", lbZ + "ips/{id}", OpReleaseLBIP, ip.deleteIP},

		{"POST", lbZ + "lbs/{id}/frontends", OpCreateFrontend, fe.createFrontend},
		{"GET", lbZ + "lbs/{id}/frontends", OpListFrontends, fe.listFrontends},
		{"GET", lbZ + "frontends/{id}", OpGetFrontend, fe.getFrontend},
		{"PUT", lbZ + "frontends/{id}", OpUpdateFrontend, fe.updateFrontend},
		{"DELETE", lbZ + "frontends/{id}", OpDeleteFrontend, fe.deleteFrontend},
		{"GET", lbZ + "frontends/{id}/acls", OpListACLs, fe.listACLs},
		{"PUT", lbZ + "frontends/{id}/acls", OpSetACLs, fe.setACLs},

		{"POST", lbZ + "lbs/{id}/backends", OpCreateBackend, be.createBackend},
		{"GET", lbZ + "lbs/{id}/backends", OpListBackends, be.listBackends},
		{"GET", lbZ + "backends/{id}", OpGetBackend, be.getBackend},
		{"PUT", lbZ + "backends/{id}", OpUpdateBackend, be.updateBackend},
		{"DELETE", lbZ + "backends/{id}", OpDeleteBackend, be.deleteBackend},
		{"PUT", lbZ + "backends/{id}/servers", OpSetBackendServers, be.setBackendServers},
		{"PUT", lbZ + "backends/{id}/healthcheck", OpUpdateHealthCheck, be.updateHealthCheck},
	}
}

// getMetadata answers the API gateway's /metadata, which the SDK reads after
// its calls to build SRNs; it needs no authentication.
func getMetadata(*call) reply {
	return ok(map[string]string{"domain": "scw.cloud", "partition": "scw", "platform": "external"})
}

// pathParams are the variable segments of a path.
type pathParams struct {
	region, zone, id string
}

// match finds the route of r and its {region}, {zone} and {id}.
func (s *Server) match(r *http.Request) (*route, pathParams) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for i := range s.routes {
		cand := &s.routes[i]
		if cand.method != r.Method || len(cand.segs) != len(segs) {
			continue
		}
		var pp pathParams
		ok := true
		for j, p := range cand.segs {
			switch p {
			case "{region}":
				pp.region = segs[j]
			case "{zone}":
				pp.zone = segs[j]
			case "{id}":
				pp.id = segs[j]
			default:
				ok = p == segs[j]
			}
			if !ok {
				break
			}
		}
		if ok {
			return cand, pp
		}
	}
	return nil, pathParams{}
}

// zoneServed tells whether zone is one of the region's: <region>-1 to -3.
func (s *Server) zoneServed(zone string) bool {
	switch strings.TrimPrefix(zone, s.opts.Region+"-") {
	case "1", "2", "3":
		return strings.HasPrefix(zone, s.opts.Region+"-")
	}
	return false
}

// call is one request on its way through a handler.
type call struct {
	op     Op
	r      *http.Request
	region string
	zone   string
	id     string // the {id} of the path
	body   []byte
	query  map[string][]string

	// Set by handlers.
	ipID string
	// lbID is the Load Balancer whose call changes IPs, for the audit log.
	lbID string
	// lost marks the changes of a CommitThenFail call in the audit log.
	lost bool
}

// reply is a handler's answer: a JSON body, or no body when body is nil.
type reply struct {
	status int
	body   any
}

func ok(body any) reply { return reply{status: http.StatusOK, body: body} }

func noContent() reply { return reply{status: http.StatusNoContent} }

func opName(op Op) string {
	if op == "" {
		return "no route"
	}
	return string(op)
}

// decodeBody unmarshals the JSON body into v; an empty body reads as {}.
func decodeBody(c *call, v any) *reply {
	if len(bytes.TrimSpace(c.body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		rep := errInvalidArguments("body", "the request body is not valid JSON for this operation: "+err.Error())
		return &rep
	}
	return nil
}

func writeReply(w http.ResponseWriter, rep reply) {
	if rep.body == nil {
		w.WriteHeader(rep.status)
		return
	}
	b, err := json.Marshal(rep.body)
	if err != nil {
		// Bodies are the emulator's own types: failing here is a bug.
		panic(fmt.Sprintf("emulator: encoding a reply: %v", err))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(rep.status)
	_, _ = w.Write(b)
}
