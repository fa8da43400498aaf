package emulator

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	account "github.com/scaleway/scaleway-sdk-go/api/account/v3"
	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	vpc "github.com/scaleway/scaleway-sdk-go/api/vpc/v2"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

func TestMetadata(t *testing.T) {
	srv, c := setup(t)
	// No token needed: the SDK reads it to build SRNs.
	wantBody(t, raw(t, srv, "GET", "/metadata", "", ""), 200, `{"domain":"scw.cloud","partition":"scw","platform":"external"}`)
	md, err := c.scw.GetAPIMetadata()
	if err != nil || md.Domain != "scw.cloud" || md.Partition != "scw" || md.Platform != "external" {
		t.Fatalf("metadata %+v %v", md, err)
	}
}

func TestAuthentication(t *testing.T) {
	srv, _ := setup(t)
	denied := `{"message":"authentication is denied","method":"api_key","reason":"not_found","type":"denied_authentication"}`
	wantBody(t, raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips", "", ""), 401, denied)
	wantBody(t, raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips", "", "6f5d9a3c-0000-4c8d-9e7f-0a1b2c3d4e5f"), 401, denied)
	wantBody(t, raw(t, srv, "GET", "/nowhere", "", ""), 401, denied)

	for name, opts := range map[string][]scw.ClientOption{
		"no credentials": nil,
		"wrong secret":   {scw.WithAuth(testAccessKey, "6f5d9a3c-0000-4c8d-9e7f-0a1b2c3d4e5f")},
	} {
		t.Run(name, func(t *testing.T) {
			cl, err := scw.NewClient(append([]scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithDefaultRegion(scw.RegionFrPar)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ipam.NewAPI(cl).ListIPs(&ipam.ListIPsRequest{})
			if da := errAs[*scw.DeniedAuthenticationError](t, err); da.Method != "api_key" || da.Reason != "not_found" {
				t.Fatalf("%+v", da)
			}
		})
	}

	// Without Options.SecretKey any token is accepted.
	open := NewTestServer(t, Options{})
	if got := raw(t, open, "GET", "/ipam/v1/regions/fr-par/ips", "", "anything"); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if got := raw(t, open, "GET", "/ipam/v1/regions/fr-par/ips", "", ""); got.status != 401 {
		t.Fatalf("no token: %d", got.status)
	}
}

func TestRoutingErrors(t *testing.T) {
	srv, c := setup(t)
	got := raw(t, srv, "GET", "/instance/v1/zones/fr-par-1/servers", "", testSecretKey)
	wantBody(t, got, 404, `{"message":"resource is not found","resource":"route","resource_id":"GET /instance/v1/zones/fr-par-1/servers","type":"not_found"}`)
	if got := raw(t, srv, "PUT", "/ipam/v1/regions/fr-par/ips/"+unknownID, "{}", testSecretKey); got.status != 404 {
		t.Fatalf("unknown method: %d", got.status)
	}
	if counts := srv.Counts(); len(counts) != 1 || counts[OpMetadata] != 1 {
		t.Fatalf("unknown routes counted: %v", srv.Counts())
	}

	_, err := c.ipam.GetIP(&ipam.GetIPRequest{Region: scw.RegionNlAms, IPID: unknownID})
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "region" || nf.ResourceID != "nl-ams" {
		t.Fatalf("%+v", nf)
	}

	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	got = raw(t, srv, "POST", "/ipam/v1/regions/fr-par/ips", `{"source":{"private_network_id":"`+pn.ID+`"`, testSecretKey)
	if got.status != 400 {
		t.Fatalf("malformed JSON: %d %s", got.status, got.body)
	}
	body := got.json(t)
	details, _ := body["details"].([]any)
	if body["type"] != "invalid_arguments" || body["message"] != "invalid argument(s)" || len(details) != 1 {
		t.Fatalf("body %s", got.body)
	}
	if d := details[0].(map[string]any); d["argument_name"] != "body" || d["reason"] != "constraint" || !strings.Contains(d["help_message"].(string), "JSON") {
		t.Fatalf("details %v", d)
	}
	if got := raw(t, srv, "POST", "/ipam/v1/regions/fr-par/ips", `{"tags":"not a list"}`, testSecretKey); got.status != 400 {
		t.Fatalf("wrong JSON type: %d %s", got.status, got.body)
	}
}

func TestProjects(t *testing.T) {
	srv, c := setup(t)
	const org = "105bdce1-64c0-48ab-899d-868455867ecf"
	got := raw(t, srv, "POST", "/account/v3/projects", `{"name":"p","organization_id":"`+org+`","description":""}`, testSecretKey)
	created := got.json(t)
	if got.status != 200 || created["qualification"] != nil || created["organization_id"] != org || len(created) != 7 {
		t.Fatalf("create: %d %s", got.status, got.body)
	}
	id := created["id"].(string)
	p, err := c.project.GetProject(&account.ProjectAPIGetProjectRequest{ProjectID: id})
	if err != nil || p.Name != "p" || p.Qualification == nil || p.Qualification.ArchitectureType != "unknown_architecture_type" {
		t.Fatalf("get: %+v %v", p, err)
	}
	// Objects of a created project carry its organization.
	req := pnReq(t, "x", "")
	req.ProjectID = id
	pn, err := c.vpc.CreatePrivateNetwork(req)
	if err != nil || pn.OrganizationID != org || pn.ProjectID != id {
		t.Fatalf("pn %+v %v", pn, err)
	}
	err = c.project.DeleteProject(&account.ProjectAPIDeleteProjectRequest{ProjectID: id})
	errAs[*scw.PreconditionFailedError](t, err)
	if err := c.vpc.DeletePrivateNetwork(&vpc.DeletePrivateNetworkRequest{PrivateNetworkID: pn.ID}); err != nil {
		t.Fatal(err)
	}
	if err := c.project.DeleteProject(&account.ProjectAPIDeleteProjectRequest{ProjectID: id}); err != nil {
		t.Fatal(err)
	}
	wantBody(t, raw(t, srv, "GET", "/account/v3/projects/"+id, "", testSecretKey), 404,
		`{"message":"resource is not found","resource":"project_id","resource_id":"`+id+`","type":"not_found"}`)
	// The default project exists from the start.
	if p, err := c.project.GetProject(&account.ProjectAPIGetProjectRequest{ProjectID: testProject}); err != nil || p.OrganizationID != testProject {
		t.Fatalf("default project: %+v %v", p, err)
	}
}

// loggedFirst is a ResponseWriter that checks, when the answer starts to
// leave, that the server's request log already holds the call.
type loggedFirst struct {
	http.ResponseWriter
	srv    *Server
	before int
	logged []bool
}

func (w *loggedFirst) WriteHeader(status int) {
	w.logged = append(w.logged, len(w.srv.Requests()) > w.before)
	w.ResponseWriter.WriteHeader(status)
}

// TestCallIsLoggedBeforeItIsAnswered: a client that holds its answer
// finds its call in Requests (tests count calls as soon as they return).
// Recorded after the answer, the last call of a listing was sometimes
// missing from the log when the test read it.
func TestCallIsLoggedBeforeItIsAnswered(t *testing.T) {
	srv, _ := setup(t)
	for _, tc := range []struct {
		name  string
		fault *Fault
		want  int
	}{
		{"answered", nil, http.StatusOK},
		{"faulted", &Fault{Status: http.StatusServiceUnavailable}, http.StatusServiceUnavailable},
		{"committed then failed", &Fault{CommitThenFail: true}, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				srv.FailNext(OpListIPs, 1, *tc.fault)
			}
			r := httptest.NewRequest("GET", "/ipam/v1/regions/fr-par/ips", nil)
			r.Header.Set("X-Auth-Token", testSecretKey)
			w := &loggedFirst{ResponseWriter: httptest.NewRecorder(), srv: srv, before: len(srv.Requests())}
			srv.ServeHTTP(w, r)
			if !slices.Equal(w.logged, []bool{true}) {
				t.Fatalf("logged before the answer: %v, want [true]", w.logged)
			}
			last := srv.Requests()[len(srv.Requests())-1]
			if last.Op != OpListIPs || last.Status != tc.want || last.Fault != (tc.fault != nil) {
				t.Fatalf("logged %+v, want ListIPs answered %d", last, tc.want)
			}
		})
	}
}
