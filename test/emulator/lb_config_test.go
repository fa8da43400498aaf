package emulator

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	lb "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Load Balancer configuration the CCM writes: frontends, backends,
// their servers, health checks and ACLs, flexible IPs, and the timing of a
// Load Balancer's life.

func msPtr(ms int) *time.Duration {
	d := time.Duration(ms) * time.Millisecond
	return &d
}

// mustBackend creates the backend the CCM creates for a Service port.
func mustBackend(t *testing.T, c clients, lbID, name string, port int32, servers ...string) *lb.Backend {
	t.Helper()
	b, err := c.lb.CreateBackend(&lb.ZonedAPICreateBackendRequest{
		LBID: lbID, Name: name, ForwardProtocol: lb.ProtocolTCP, ForwardPort: port,
		ForwardPortAlgorithm: lb.ForwardPortAlgorithmRoundrobin, StickySessions: lb.StickySessionsTypeNone,
		HealthCheck: &lb.HealthCheck{
			Port: port, CheckDelay: msPtr(5000), CheckTimeout: msPtr(5000), CheckMaxRetries: 5,
			TCPConfig: &lb.HealthCheckTCPConfig{},
		},
		ServerIP: servers, TimeoutServer: msPtr(10000), TimeoutConnect: msPtr(600000), TimeoutTunnel: msPtr(600000),
		OnMarkedDownAction: lb.OnMarkedDownActionOnMarkedDownActionNone, ProxyProtocol: lb.ProxyProtocolProxyProtocolNone,
		MaxRetries: scw.Int32Ptr(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustFrontend(t *testing.T, c clients, lbID, backendID, name string, port int32) *lb.Frontend {
	t.Helper()
	f, err := c.lb.CreateFrontend(&lb.ZonedAPICreateFrontendRequest{
		LBID: lbID, Name: name, InboundPort: port, BackendID: backendID, TimeoutClient: msPtr(600000),
		CertificateIDs: &[]string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLBBackendsAndFrontends(t *testing.T) {
	srv, c := setup(t)
	l := mustLB(t, c, "svc")
	b := mustBackend(t, c, l.ID, "uid_tcp_30080", 30080, "10.0.0.5")
	if b.LB == nil || b.LB.ID != l.ID || b.LB.BackendCount != 1 || !slices.Equal(b.Pool, []string{"10.0.0.5"}) ||
		b.HealthCheck == nil || b.HealthCheck.TCPConfig == nil || b.HealthCheck.Port != 30080 || *b.TimeoutServer != 10*time.Second {
		t.Fatalf("backend %+v", b)
	}
	f := mustFrontend(t, c, l.ID, b.ID, "uid_tcp_80", 80)
	if f.Backend == nil || f.Backend.ID != b.ID || f.InboundPort != 80 || f.LB.FrontendCount != 1 || *f.TimeoutClient != 10*time.Minute {
		t.Fatalf("frontend %+v", f)
	}
	// Another frontend on the same port is refused.
	_, err := c.lb.CreateFrontend(&lb.ZonedAPICreateFrontendRequest{LBID: l.ID, InboundPort: 80, BackendID: b.ID})
	wantResponseError(t, err, http.StatusConflict, "already_exists")

	// Servers, health check, update.
	b, f = updateBackendAndFrontend(t, c, b, f)

	// Lists, by name as the CCM asks.
	fs, err := c.lb.ListFrontends(&lb.ZonedAPIListFrontendsRequest{LBID: l.ID}, scw.WithAllPages())
	if err != nil || fs.TotalCount != 1 || fs.Frontends[0].ID != f.ID {
		t.Fatalf("frontends %+v, %v", fs, err)
	}
	bs, err := c.lb.ListBackends(&lb.ZonedAPIListBackendsRequest{LBID: l.ID, Name: scw.StringPtr("30080")})
	if err != nil || bs.TotalCount != 1 || bs.Backends[0].ID != b.ID {
		t.Fatalf("backends %+v, %v", bs, err)
	}

	// A frontend's backend goes after it.
	err = c.lb.DeleteBackend(&lb.ZonedAPIDeleteBackendRequest{BackendID: b.ID})
	errAs[*scw.PreconditionFailedError](t, err)
	if err := c.lb.DeleteFrontend(&lb.ZonedAPIDeleteFrontendRequest{FrontendID: f.ID}); err != nil {
		t.Fatal(err)
	}
	if err := c.lb.DeleteBackend(&lb.ZonedAPIDeleteBackendRequest{BackendID: b.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = c.lb.GetFrontend(&lb.ZonedAPIGetFrontendRequest{FrontendID: f.ID})
	wantLBNotFound(t, err, "frontend")
	_, err = c.lb.GetBackend(&lb.ZonedAPIGetBackendRequest{BackendID: b.ID})
	wantLBNotFound(t, err, "backend")
	if got := srv.LBs()[0]; got.Frontends != 0 || got.Backends != 0 {
		t.Fatalf("LBs() %+v", got)
	}
}

// updateBackendAndFrontend sets b's servers and health check, updates b
// then f, its frontend, and returns them as updated.
func updateBackendAndFrontend(t *testing.T, c clients, b *lb.Backend, f *lb.Frontend) (*lb.Backend, *lb.Frontend) {
	t.Helper()
	b, err := c.lb.SetBackendServers(&lb.ZonedAPISetBackendServersRequest{BackendID: b.ID, ServerIP: []string{"10.0.0.5", "10.0.0.6"}})
	if err != nil || !slices.Equal(b.Pool, []string{"10.0.0.5", "10.0.0.6"}) {
		t.Fatalf("servers: %+v, %v", b, err)
	}
	hc, err := c.lb.UpdateHealthCheck(&lb.ZonedAPIUpdateHealthCheckRequest{
		BackendID: b.ID, Port: 30081, CheckMaxRetries: 3, CheckDelay: msPtr(1000), TCPConfig: &lb.HealthCheckTCPConfig{},
	})
	if err != nil || hc.Port != 30081 || *hc.CheckDelay != time.Second {
		t.Fatalf("health check: %+v, %v", hc, err)
	}
	b, err = c.lb.UpdateBackend(&lb.ZonedAPIUpdateBackendRequest{
		BackendID: b.ID, Name: "uid_tcp_30080", ForwardProtocol: lb.ProtocolTCP, ForwardPort: 30090,
		ForwardPortAlgorithm: lb.ForwardPortAlgorithmLeastconn, StickySessions: lb.StickySessionsTypeNone,
		OnMarkedDownAction: lb.OnMarkedDownActionShutdownSessions, ProxyProtocol: lb.ProxyProtocolProxyProtocolV2,
	})
	if err != nil || b.ForwardPort != 30090 || b.HealthCheck.Port != 30081 || len(b.Pool) != 2 {
		t.Fatalf("update: %+v, %v", b, err)
	}
	f, err = c.lb.UpdateFrontend(&lb.ZonedAPIUpdateFrontendRequest{FrontendID: f.ID, Name: "uid_tcp_8080", InboundPort: 8080, BackendID: b.ID})
	if err != nil || f.InboundPort != 8080 || f.TimeoutClient != nil {
		t.Fatalf("update frontend: %+v, %v", f, err)
	}
	return b, f
}

func TestLBConfigurationGoesWithTheLB(t *testing.T) {
	srv, c := setup(t)
	l := mustLB(t, c, "svc")
	b := mustBackend(t, c, l.ID, "b", 30080)
	f := mustFrontend(t, c, l.ID, b.ID, "f", 80)
	if got := srv.LBs()[0]; got.Frontends != 1 || got.Backends != 1 {
		t.Fatalf("LBs() %+v", got)
	}
	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: l.ID}); err != nil {
		t.Fatal(err)
	}
	_, err := c.lb.GetFrontend(&lb.ZonedAPIGetFrontendRequest{FrontendID: f.ID})
	wantLBNotFound(t, err, "frontend")
	_, err = c.lb.GetBackend(&lb.ZonedAPIGetBackendRequest{BackendID: b.ID})
	wantLBNotFound(t, err, "backend")
	_, err = c.lb.ListFrontends(&lb.ZonedAPIListFrontendsRequest{LBID: l.ID})
	wantLBNotFound(t, err, "lbs")
}

func TestLBACLs(t *testing.T) {
	_, c := setup(t)
	l := mustLB(t, c, "svc")
	f := mustFrontend(t, c, l.ID, mustBackend(t, c, l.ID, "b", 30080).ID, "f", 80)
	name := f.ID + "-lb-source-range"
	list := func() []*lb.ACL {
		t.Helper()
		resp, err := c.lb.ListACLs(&lb.ZonedAPIListACLsRequest{FrontendID: f.ID, Name: &name}, scw.WithAllPages())
		if err != nil {
			t.Fatal(err)
		}
		return resp.ACLs
	}
	if acls := list(); len(acls) != 0 {
		t.Fatalf("new frontend has ACLs %+v", acls)
	}
	subnet := "10.0.0.0/8"
	resp, err := c.lb.SetACLs(&lb.ZonedAPISetACLsRequest{FrontendID: f.ID, ACLs: []*lb.ACLSpec{
		{Name: name, Action: &lb.ACLAction{Type: lb.ACLActionTypeAllow}, Match: &lb.ACLMatch{IPSubnet: []*string{&subnet}}, Index: 0},
		{Name: name, Action: &lb.ACLAction{Type: lb.ACLActionTypeDeny}, Match: &lb.ACLMatch{IPSubnet: []*string{scw.StringPtr("0.0.0.0/0")}}, Index: 1},
		{Name: "other", Action: &lb.ACLAction{Type: lb.ACLActionTypeAllow}, Index: 2},
	}})
	if err != nil || resp.TotalCount != 3 {
		t.Fatalf("set: %+v, %v", resp, err)
	}
	acls := list()
	if len(acls) != 2 || acls[0].Action.Type != lb.ACLActionTypeAllow || *acls[0].Match.IPSubnet[0] != subnet ||
		acls[1].Index != 1 || acls[0].Frontend == nil || acls[0].Frontend.ID != f.ID {
		t.Fatalf("ACLs %+v", acls)
	}
	// Setting replaces them all.
	if _, err := c.lb.SetACLs(&lb.ZonedAPISetACLsRequest{FrontendID: f.ID, ACLs: []*lb.ACLSpec{}}); err != nil {
		t.Fatal(err)
	}
	if acls := list(); len(acls) != 0 {
		t.Fatalf("after an empty set: %+v", acls)
	}
}

func TestLBFlexibleIPs(t *testing.T) {
	srv, c := setup(t)
	public := mustLB(t, c, "public")
	private, err := c.lb.CreateLB(&lb.ZonedAPICreateLBRequest{Name: "private", Type: "lb-s", AssignFlexibleIP: scw.BoolPtr(false), AssignFlexibleIPv6: scw.BoolPtr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if len(private.IP) != 0 || len(public.IP) != 1 || public.IP[0].LBID == nil || *public.IP[0].LBID != public.ID ||
		!strings.HasSuffix(public.IP[0].Reverse, ".lb.fr-par.scw.cloud") {
		t.Fatalf("private %+v, public %+v", private.IP, public.IP)
	}
	addr := public.IP[0].IPAddress
	ips, err := c.lb.ListIPs(&lb.ZonedAPIListIPsRequest{IPAddress: &addr})
	if err != nil || ips.TotalCount != 1 || ips.IPs[0].ID != public.IP[0].ID {
		t.Fatalf("by address: %+v, %v", ips, err)
	}
	// A Load Balancer created on a flexible IP of its own.
	ip, err := c.lb.CreateIP(&lb.ZonedAPICreateIPRequest{})
	if err != nil {
		t.Fatal(err)
	}
	on, err := c.lb.CreateLB(&lb.ZonedAPICreateLBRequest{Name: "on", Type: "lb-s", IPIDs: []string{ip.ID}})
	if err != nil || len(on.IP) != 1 || on.IP[0].ID != ip.ID {
		t.Fatalf("on its IP: %+v, %v", on, err)
	}
	// release_ip=false leaves the IP, detached; true releases it.
	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: on.ID}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.lb.GetIP(&lb.ZonedAPIGetIPRequest{IPID: ip.ID}); err != nil || got.LBID != nil {
		t.Fatalf("kept IP %+v, %v", got, err)
	}
	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: public.ID, ReleaseIP: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.lb.GetIP(&lb.ZonedAPIGetIPRequest{IPID: public.IP[0].ID})
	wantLBNotFound(t, err, "ips")
	if lbs := srv.LBs(); len(lbs) != 1 || len(lbs[0].FlexibleIPs) != 0 {
		t.Fatalf("LBs() %+v", lbs)
	}
}

func TestLBUpdateAndMigrate(t *testing.T) {
	_, c := setup(t)
	l := mustLB(t, c, "svc", "managed")
	got, err := c.lb.UpdateLB(&lb.ZonedAPIUpdateLBRequest{LBID: l.ID, Name: l.Name, Tags: l.Tags, SslCompatibilityLevel: lb.SSLCompatibilityLevelSslCompatibilityLevelModern})
	if err != nil || got.SslCompatibilityLevel != lb.SSLCompatibilityLevelSslCompatibilityLevelModern || !slices.Equal(got.Tags, []string{"managed"}) {
		t.Fatalf("update: %+v, %v", got, err)
	}
	got, err = c.lb.MigrateLB(&lb.ZonedAPIMigrateLBRequest{LBID: l.ID, Type: "LB-GP-M"})
	if err != nil || got.Type != "lb-gp-m" {
		t.Fatalf("migrate: %+v, %v", got, err)
	}
}

// TestLBTakesTimeAsScalewayDoes walks a Load Balancer's life on the
// emulator's clock: created, ready, a change settling, a Private Network
// attached and detached.
func TestLBTakesTimeAsScalewayDoes(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 7, 21, 10, 19, 1, 0, time.UTC))
	srv, c := setup(t, func(o *Options) {
		o.Clock, o.LBCreateDelay, o.LBSettleDelay = clk, ScalewayLBCreateDelay, ScalewayLBSettleDelay
	})
	pn := mustPN(t, srv, "nodes", "10.0.0.0/24")
	l := mustLB(t, c, "svc")
	if l.Status != lb.LBStatusToCreate || len(l.Instances) != 0 {
		t.Fatalf("created %s, %d instances", l.Status, len(l.Instances))
	}
	get := func() *lb.LB {
		t.Helper()
		got, err := c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: l.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if got := get(); got.Status != lb.LBStatusCreating || len(got.Instances) != 1 || got.Instances[0].Status != lb.InstanceStatusUnknown {
		t.Fatalf("after 1 s: %s %+v", got.Status, got.Instances)
	}
	// Not ready: changes are refused, as the CCM expects (it waits).
	_, err := c.lb.CreateBackend(&lb.ZonedAPICreateBackendRequest{LBID: l.ID, ForwardProtocol: lb.ProtocolTCP, ForwardPort: 1, HealthCheck: &lb.HealthCheck{Port: 1}})
	if ts := errAs[*scw.TransientStateError](t, err); ts.CurrentState != "creating" {
		t.Fatalf("%+v", ts)
	}
	_, err = attach(c, l.ID, pn.ID)
	errAs[*scw.TransientStateError](t, err)

	clk.SetTime(clk.Now().Add(ScalewayLBCreateDelay))
	if got := get(); got.Status != lb.LBStatusReady || got.Instances[0].Status != lb.InstanceStatusReady {
		t.Fatalf("after the creation: %s %+v", got.Status, got.Instances)
	}
	mustBackend(t, c, l.ID, "b", 30080)
	if got := get(); got.Status != lb.LBStatusReady || got.Instances[0].Status != lb.InstanceStatusPending {
		t.Fatalf("right after a change: %s %+v", got.Status, got.Instances)
	}
	attachmentsSettle(t, srv, c, clk, l.ID, pn.ID, get)
	reattachmentReplaces(t, c, clk, l.ID, pn.ID, get)
}

// attachmentsSettle: on a ready Load Balancer, a Private Network attached
// is pending until the settle delay has passed, and so is one detached.
func attachmentsSettle(t *testing.T, srv *Server, c clients, clk *clocktesting.FakePassiveClock, lbID, pnID string, get func() *lb.LB) {
	t.Helper()
	att, err := attach(c, lbID, pnID)
	if err != nil || att.Status != lb.PrivateNetworkStatusPending {
		t.Fatalf("attach: %+v, %v", att, err)
	}
	clk.SetTime(clk.Now().Add(ScalewayLBSettleDelay))
	if pns := lbPNs(t, c, lbID); len(pns) != 1 || pns[0].Status != lb.PrivateNetworkStatusReady || get().Instances[0].Status != lb.InstanceStatusReady {
		t.Fatalf("settled: %+v", pns)
	}
	if err := detach(c, lbID, pnID); err != nil {
		t.Fatal(err)
	}
	if pns := lbPNs(t, c, lbID); len(pns) != 1 || pns[0].Status != lb.PrivateNetworkStatusPending || get().PrivateNetworkCount != 1 {
		t.Fatalf("detaching: %+v", pns)
	}
	if pns := srv.LBs()[0].PrivateNetworks; len(pns) != 0 {
		t.Fatalf("a detaching network still shows in LBs(): %+v", pns)
	}
	clk.SetTime(clk.Now().Add(ScalewayLBSettleDelay))
	if pns := lbPNs(t, c, lbID); len(pns) != 0 || get().PrivateNetworkCount != 0 {
		t.Fatalf("detached: %+v", pns)
	}
}

// reattachmentReplaces: detached and attached again at once, as the CCM
// does when a network's IPAM IDs change, the new attachment replaces the
// old one.
func reattachmentReplaces(t *testing.T, c clients, clk *clocktesting.FakePassiveClock, lbID, pnID string, get func() *lb.LB) {
	t.Helper()
	if _, err := attach(c, lbID, pnID); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(ScalewayLBSettleDelay))
	if err := detach(c, lbID, pnID); err != nil {
		t.Fatal(err)
	}
	again, err := attach(c, lbID, pnID)
	if err != nil {
		t.Fatal(err)
	}
	if pns := lbPNs(t, c, lbID); len(pns) != 1 || pns[0].IpamIDs[0] != again.IpamIDs[0] || get().PrivateNetworkCount != 1 {
		t.Fatalf("re-attached: %+v", pns)
	}
}

func TestLBConfigurationFaults(t *testing.T) {
	srv, c := setup(t)
	l := mustLB(t, c, "svc")
	for _, op := range []Op{OpCreateBackend, OpCreateFrontend, OpListACLs, OpSetBackendServers, OpUpdateLB} {
		srv.FailNext(op, 1, Fault{Status: http.StatusServiceUnavailable})
	}
	_, err := c.lb.CreateBackend(&lb.ZonedAPICreateBackendRequest{LBID: l.ID, ForwardProtocol: lb.ProtocolTCP, ForwardPort: 1, HealthCheck: &lb.HealthCheck{Port: 1}})
	wantResponseError(t, err, http.StatusServiceUnavailable, "")
	b := mustBackend(t, c, l.ID, "b", 30080)
	_, err = c.lb.CreateFrontend(&lb.ZonedAPICreateFrontendRequest{LBID: l.ID, InboundPort: 80, BackendID: b.ID})
	wantResponseError(t, err, http.StatusServiceUnavailable, "")
	f := mustFrontend(t, c, l.ID, b.ID, "f", 80)
	_, err = c.lb.ListACLs(&lb.ZonedAPIListACLsRequest{FrontendID: f.ID})
	wantResponseError(t, err, http.StatusServiceUnavailable, "")
	_, err = c.lb.SetBackendServers(&lb.ZonedAPISetBackendServersRequest{BackendID: b.ID, ServerIP: []string{"10.0.0.1"}})
	wantResponseError(t, err, http.StatusServiceUnavailable, "")
	_, err = c.lb.UpdateLB(&lb.ZonedAPIUpdateLBRequest{LBID: l.ID, Name: "x"})
	wantResponseError(t, err, http.StatusServiceUnavailable, "")
	for _, op := range []Op{OpCreateBackend, OpCreateFrontend, OpListACLs, OpSetBackendServers, OpUpdateLB} {
		if n := srv.Count(op); n < 1 {
			t.Fatalf("%s counted %d", op, n)
		}
	}
	// A fault answered with a backend body names the resource.
	srv.FailNext(OpGetBackend, 1, Fault{Status: http.StatusForbidden})
	_, err = c.lb.GetBackend(&lb.ZonedAPIGetBackendRequest{BackendID: b.ID})
	if pd := errAs[*scw.PermissionsDeniedError](t, err); pd.Details[0].Resource != "backend" || pd.Details[0].Action != "read" {
		t.Fatalf("%+v", pd.Details[0])
	}
}
