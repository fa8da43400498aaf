package emulator

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lb "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

var macRE = regexp.MustCompile(`^([0-9A-F]{2}:){5}[0-9A-F]{2}$`)

// wantLBNotFound checks the Load Balancer API's bare 404 for what ("lbs",
// "frontend", "backend"), which the SDK reads as a plain ResponseError.
func wantLBNotFound(t *testing.T, err error, what string) {
	t.Helper()
	re := errAs[*scw.ResponseError](t, err)
	if re.StatusCode != 404 || re.Message != what+" not Found" {
		t.Fatalf("ResponseError %d %q, want 404 %q", re.StatusCode, re.Message, what+" not Found")
	}
}

func mustLB(t *testing.T, c clients, name string, tags ...string) *lb.LB {
	t.Helper()
	l, err := c.lb.CreateLB(&lb.ZonedAPICreateLBRequest{Name: name, Type: "LB-S", Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func attach(c clients, lbID, pnID string, ipamIDs ...string) (*lb.PrivateNetwork, error) {
	return c.lb.AttachPrivateNetwork(&lb.ZonedAPIAttachPrivateNetworkRequest{LBID: lbID, PrivateNetworkID: pnID, IpamIDs: ipamIDs})
}

func detach(c clients, lbID, pnID string) error {
	return c.lb.DetachPrivateNetwork(&lb.ZonedAPIDetachPrivateNetworkRequest{LBID: lbID, PrivateNetworkID: pnID})
}

func mustGetIP(t *testing.T, c clients, id string) *ipam.IP {
	t.Helper()
	ip, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// wantLBResource checks that IPAM shows ip attached to Load Balancer l.
func wantLBResource(t *testing.T, ip *ipam.IP, l *lb.LB) {
	t.Helper()
	r := ip.Resource
	if r == nil || r.Type != ipam.ResourceTypeLBServer || r.ID != l.ID || r.Name == nil || *r.Name != l.Name {
		t.Fatalf("resource %+v, want lb_server %s %q", r, l.ID, l.Name)
	}
	if r.MacAddress == nil || !macRE.MatchString(*r.MacAddress) {
		t.Fatalf("MAC address %v", r.MacAddress)
	}
}

func lbPNs(t *testing.T, c clients, lbID string) []*lb.PrivateNetwork {
	t.Helper()
	resp, err := c.lb.ListLBPrivateNetworks(&lb.ZonedAPIListLBPrivateNetworksRequest{LBID: lbID}, scw.WithAllPages())
	if err != nil {
		t.Fatal(err)
	}
	if int(resp.TotalCount) != len(resp.PrivateNetwork) {
		t.Fatalf("total_count %d for %d Private Networks", resp.TotalCount, len(resp.PrivateNetwork))
	}
	return resp.PrivateNetwork
}

func auditString(srv *Server) string {
	var out []string
	for _, ev := range srv.Audit() {
		out = append(out, fmt.Sprintf("%s:%s", ev.Kind, ev.Op))
	}
	return strings.Join(out, " ")
}

func TestLBLifecycle(t *testing.T) {
	srv, c := setup(t)
	front := mustLB(t, c, "front", "k8s", "svc")
	if front.ID == "" || front.Name != "front" || front.Zone != scw.ZoneFrPar1 || front.Status != lb.LBStatusReady ||
		front.ProjectID != testProject || front.OrganizationID != testProject || front.Type != "lb-s" ||
		!slices.Equal(front.Tags, []string{"k8s", "svc"}) || len(front.IP) != 1 || front.PrivateNetworkCount != 0 ||
		front.CreatedAt == nil || front.UpdatedAt == nil || !front.CreatedAt.Equal(*front.UpdatedAt) {
		t.Fatalf("created %+v", front)
	}
	got, err := c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: front.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != front.ID || got.Name != "front" || !got.CreatedAt.Equal(*front.CreatedAt) || !slices.Equal(got.Tags, front.Tags) {
		t.Fatalf("got %+v, want %+v", got, front)
	}
	back := mustLB(t, c, "back")
	frontier := mustLB(t, c, "frontier")

	// Without project_id, the emulator's project.
	rawLB := raw(t, srv, "POST", "/lb/v1/zones/fr-par-1/lbs", `{"name":"bare","type":"LB-GP-M"}`, testSecretKey).json(t)
	if rawLB["project_id"] != testProject || rawLB["type"] != "lb-gp-m" || rawLB["status"] != "ready" || rawLB["zone"] != "fr-par-1" {
		t.Fatalf("created without project: %v", rawLB)
	}
	bareID := rawLB["id"].(string)

	wantLBListings(t, c, front.ID, back.ID)

	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: back.ID, ReleaseIP: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: back.ID})
	wantLBNotFound(t, err, "lbs")
	err = c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: back.ID})
	wantLBNotFound(t, err, "lbs")
	if got, n := lbNames(t, c, lb.ZonedAPIListLBsRequest{}); got != "front frontier bare" || n != 3 {
		t.Fatalf("after delete: %q (%d)", got, n)
	}
	var snap []string
	for _, l := range srv.LBs() {
		snap = append(snap, l.ID)
	}
	if !slices.Equal(snap, []string{front.ID, frontier.ID, bareID}) {
		t.Fatalf("LBs() %v", snap)
	}
	if got := auditString(srv); got != "create_lb:CreateLB create_lb:CreateLB create_lb:CreateLB create_lb:CreateLB delete_lb:DeleteLB lb_gone:DeleteLB" {
		t.Fatalf("audit %s", got)
	}
	for _, ev := range srv.Audit()[4:] {
		if ev.LBID != back.ID || ev.IPID != "" {
			t.Fatalf("delete event %+v", ev)
		}
	}
	if n := srv.Count(OpCreateLB); n != 4 {
		t.Fatalf("%d CreateLB calls", n)
	}
}

// lbNames lists the Load Balancers req asks for, and returns their names
// and the total count.
func lbNames(t *testing.T, c clients, req lb.ZonedAPIListLBsRequest, opts ...scw.RequestOption) (string, uint32) {
	t.Helper()
	resp, err := c.lb.ListLBs(&req, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range resp.LBs {
		out = append(out, l.Name)
	}
	return strings.Join(out, " "), resp.TotalCount
}

// wantLBListings checks TestLBLifecycle's listings of front, back, frontier
// and bare, made in that order: all, by name, by page, ordered by name,
// and by tag and IDs.
func wantLBListings(t *testing.T, c clients, frontID, backID string) {
	t.Helper()
	if got, n := lbNames(t, c, lb.ZonedAPIListLBsRequest{}, scw.WithAllPages()); got != "front back frontier bare" || n != 4 {
		t.Fatalf("all: %q (%d)", got, n)
	}
	if got, n := lbNames(t, c, lb.ZonedAPIListLBsRequest{Name: scw.StringPtr("front")}); got != "front frontier" || n != 2 {
		t.Fatalf("by name: %q (%d)", got, n)
	}
	if got, n := lbNames(t, c, lb.ZonedAPIListLBsRequest{Page: scw.Int32Ptr(2), PageSize: scw.Uint32Ptr(3)}); got != "bare" || n != 4 {
		t.Fatalf("page 2 of 3: %q (%d)", got, n)
	}
	if got, _ := lbNames(t, c, lb.ZonedAPIListLBsRequest{OrderBy: lb.ListLBsRequestOrderByNameAsc}); got != "back bare front frontier" {
		t.Fatalf("by name asc: %q", got)
	}
	if got, _ := lbNames(t, c, lb.ZonedAPIListLBsRequest{Tags: []string{"svc"}, LBIDs: []string{frontID, backID}}); got != "front" {
		t.Fatalf("by tag and IDs: %q", got)
	}
}

func TestLBZones(t *testing.T) {
	srv, c := setup(t)
	l, err := c.lb.CreateLB(&lb.ZonedAPICreateLBRequest{Zone: scw.ZoneFrPar2, Name: "par2", Type: "LB-S"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Zone != scw.ZoneFrPar2 {
		t.Fatalf("zone %s", l.Zone)
	}
	if _, err := c.lb.GetLB(&lb.ZonedAPIGetLBRequest{Zone: scw.ZoneFrPar2, LBID: l.ID}); err != nil {
		t.Fatal(err)
	}
	// Another zone of the region does not have it.
	_, err = c.lb.GetLB(&lb.ZonedAPIGetLBRequest{Zone: scw.ZoneFrPar1, LBID: l.ID})
	wantLBNotFound(t, err, "lbs")
	resp, err := c.lb.ListLBs(&lb.ZonedAPIListLBsRequest{Zone: scw.ZoneFrPar1})
	if err != nil || resp.TotalCount != 0 || len(resp.LBs) != 0 {
		t.Fatalf("fr-par-1 lists %+v, %v", resp, err)
	}
	// Zones of other regions, or that do not exist, are not served.
	for _, z := range []scw.Zone{scw.ZoneNlAms1, "fr-par-4", "fr-par"} {
		_, err = c.lb.GetLB(&lb.ZonedAPIGetLBRequest{Zone: z, LBID: l.ID})
		if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "zone" || nf.ResourceID != string(z) {
			t.Fatalf("%s: %+v", z, nf)
		}
	}
	got := raw(t, srv, "GET", "/lb/v1/zones/nl-ams-1/lbs", "", testSecretKey)
	wantBody(t, got, 404, `{"message":"resource is not found","resource":"zone","resource_id":"nl-ams-1","type":"not_found"}`)
	// A region of its own serves its zones.
	par := NewTestServer(t, Options{Region: "nl-ams", SecretKey: testSecretKey})
	if got := raw(t, par, "GET", "/lb/v1/zones/nl-ams-3/lbs", "", testSecretKey); got.status != 200 {
		t.Fatalf("nl-ams-3 on an nl-ams emulator: %d %s", got.status, got.body)
	}
}

func TestLBWireShapes(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "cluster", "10.0.0.0/24")
	id := mustAddIP(t, srv, pn.ID, "10.0.0.30", nil, nil)
	l := mustLB(t, c, "raw")
	base := "/lb/v1/zones/fr-par-1/lbs/" + l.ID
	got := raw(t, srv, "POST", base+"/attach-private-network", `{"private_network_id":"`+pn.ID+`","ipam_ids":["`+id+`"],"ipam_config":{}}`, testSecretKey)
	if got.status != 200 {
		t.Fatalf("attach: %d %s", got.status, got.body)
	}
	for _, want := range []string{`"dhcp_config":{"ip_id":"` + id + `"}`, `"ipam_ids":["` + id + `"]`, `"private_network_id":"` + pn.ID + `"`, `"status":"ready"`, `"lb":{`} {
		if !strings.Contains(got.body, want) {
			t.Fatalf("attach answer lacks %s: %s", want, got.body)
		}
	}
	got = raw(t, srv, "GET", base+"/private-networks", "", testSecretKey)
	if got.status != 200 || !strings.HasPrefix(got.body, `{"private_network":[{`) || !strings.HasSuffix(got.body, `],"total_count":1}`) {
		t.Fatalf("list: %d %s", got.status, got.body)
	}
	got = raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips/"+id, "", testSecretKey)
	if !regexp.MustCompile(`"resource":\{"id":"` + l.ID + `","mac_address":"02:00:00:[0-9A-F:]{8}","name":"raw","type":"lb_server"\}`).MatchString(got.body) {
		t.Fatalf("IPAM shows %s", got.body)
	}
	got = raw(t, srv, "POST", base+"/detach-private-network", `{"private_network_id":"`+pn.ID+`"}`, testSecretKey)
	wantBody(t, got, 204, "")
	got = raw(t, srv, "POST", base+"/attach-private-network", `{}`, testSecretKey)
	if got.status != 400 {
		t.Fatalf("attach without private_network_id: %d %s", got.status, got.body)
	}
	got = raw(t, srv, "DELETE", base+"?release_ip=perhaps", "", testSecretKey)
	if got.status != 400 {
		t.Fatalf("bad release_ip: %d %s", got.status, got.body)
	}
	wantBody(t, raw(t, srv, "DELETE", base+"?release_ip=false", "", testSecretKey), 204, "")
}

func TestLBFaults(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "cluster", "10.0.0.0/24")
	id := mustAddIP(t, srv, pn.ID, "10.0.0.40", nil, nil)
	l := mustLB(t, c, "faulty")

	srv.FailNext(OpAttachLBPrivateNetwork, 1, Fault{Status: 503})
	_, err := attach(c, l.ID, pn.ID, id)
	wantResponseError(t, err, 503, "")
	if ip := mustGetIP(t, c, id); ip.Resource != nil {
		t.Fatalf("a refused attach attached: %+v", ip.Resource)
	}
	srv.FailNext(OpGetLB, 1, Fault{Status: 403})
	_, err = c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: l.ID})
	if pd := errAs[*scw.PermissionsDeniedError](t, err); len(pd.Details) != 1 || pd.Details[0].Resource != "lb" || pd.Details[0].Action != "read" {
		t.Fatalf("%+v", pd)
	}

	// Committed, then answered 500: the client believes it failed.
	srv.FailNext(OpAttachLBPrivateNetwork, 1, Fault{CommitThenFail: true})
	_, err = attach(c, l.ID, pn.ID, id)
	wantResponseError(t, err, 500, "server_error")
	wantLBResource(t, mustGetIP(t, c, id), l)
	evs := srv.Audit()
	if last := evs[len(evs)-1]; last.Kind != AuditAttach || !last.AnswerLost || last.Op != OpAttachLBPrivateNetwork || last.LBID != l.ID || last.IPID != id {
		t.Fatalf("event %+v", last)
	}
	// A retry finds the Private Network attached.
	_, err = attach(c, l.ID, pn.ID, id)
	wantResponseError(t, err, 409, "already_exists")

	if n := srv.Count(OpAttachLBPrivateNetwork); n != 3 {
		t.Fatalf("%d attach calls", n)
	}
	var faulted int
	for _, r := range srv.Requests() {
		if r.Op == OpAttachLBPrivateNetwork && r.Fault {
			faulted++
		}
	}
	if faulted != 2 {
		t.Fatalf("%d faulted attach requests", faulted)
	}
}

// TestListIPsOfALoadBalancer lists IPs as the cloud controller does after
// attaching: by Private Network and IPAM IDs.
