package emulator

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	account "github.com/scaleway/scaleway-sdk-go/api/account/v3"
	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lb "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	vpc "github.com/scaleway/scaleway-sdk-go/api/vpc/v2"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

// Credentials shaped like real ones, so that the SDK accepts them.
const (
	testAccessKey = "SCWABCDEFGHIJKLMNOPQ"
	testSecretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"
	testProject   = "564aa517-68b0-4fd7-8c8c-d21c4bcdcbd5"
	unknownID     = "00000000-0000-4000-8000-000000000000"
)

// clients are the real SDK APIs, talking to one emulator.
type clients struct {
	scw     *scw.Client
	ipam    *ipam.API
	vpc     *vpc.API
	project *account.ProjectAPI
	lb      *lb.ZonedAPI
}

// setup starts an emulator for testProject, guarded by testSecretKey, and
// SDK clients for it.
func setup(t *testing.T, opts ...func(*Options)) (*Server, clients) {
	t.Helper()
	o := Options{ProjectID: testProject, SecretKey: testSecretKey}
	for _, f := range opts {
		f(&o)
	}
	srv := NewTestServer(t, o)
	return srv, newClients(t, srv)
}

func newClients(t *testing.T, srv *Server, extra ...scw.ClientOption) clients {
	t.Helper()
	opts := append(srv.ClientOptions(), scw.WithDefaultRegion(scw.RegionFrPar), scw.WithDefaultZone(scw.ZoneFrPar1))
	opts = append(opts, extra...)
	c, err := scw.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK caches /metadata in the client without a lock: reading it
	// once before any concurrent use keeps later calls race-free.
	if _, err := c.GetAPIMetadata(); err != nil {
		t.Fatal(err)
	}
	return clients{scw: c, ipam: ipam.NewAPI(c), vpc: vpc.NewAPI(c), project: account.NewProjectAPI(c), lb: lb.NewZonedAPI(c)}
}

func mustPN(t *testing.T, srv *Server, name string, subnets ...string) PrivateNetwork {
	t.Helper()
	pn, err := srv.AddPrivateNetwork(name, subnets...)
	if err != nil {
		t.Fatal(err)
	}
	return pn
}

func mustAddIP(t *testing.T, srv *Server, pnID, addr string, tags []string, res *Resource) string {
	t.Helper()
	var a netip.Addr
	if addr != "" {
		a = netip.MustParseAddr(addr)
	}
	id, err := srv.AddIP(pnID, a, tags, res)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// rawResponse is an answer read without the SDK.
type rawResponse struct {
	status int
	header http.Header
	body   string
}

func (r rawResponse) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// raw sends one request with net/http; token "" sends no X-Auth-Token.
func raw(t *testing.T, srv *Server, method, path, body, token string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// wantBody checks an exact answer.
func wantBody(t *testing.T, got rawResponse, status int, body string) {
	t.Helper()
	if got.status != status || got.body != body {
		t.Fatalf("got %d %s\nwant %d %s", got.status, got.body, status, body)
	}
	if body != "" && got.header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", got.header.Get("Content-Type"))
	}
}

// errAs asserts err is (wraps) a T and returns it.
func errAs[T error](t *testing.T, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("error %T (%v), want %T", err, err, target)
	}
	return target
}

func wantResponseError(t *testing.T, err error, status int, typ string) *scw.ResponseError {
	t.Helper()
	re := errAs[*scw.ResponseError](t, err)
	if re.StatusCode != status || re.Type != typ {
		t.Fatalf("ResponseError %d %q, want %d %q (%s)", re.StatusCode, re.Type, status, typ, re.RawBody)
	}
	return re
}

func addrOf(ip *ipam.IP) string { return ip.Address.String() }

func ids(ips []*ipam.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.ID
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func ipNet(t *testing.T, s string) scw.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return scw.IPNet{IPNet: *n}
}
