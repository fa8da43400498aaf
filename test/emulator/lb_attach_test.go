package emulator

import (
	"slices"
	"strings"
	"testing"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lb "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	vpc "github.com/scaleway/scaleway-sdk-go/api/vpc/v2"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

func TestLBAttachReservedIP(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "cluster", "10.0.0.0/24")
	id := mustAddIP(t, srv, pn.ID, "10.0.0.50", []string{"pool:general", "svc:web"}, nil)
	l := mustLB(t, c, "web")

	att, err := attach(c, l.ID, pn.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the API still answers dhcp_config, and the CCM reads it: the emulator must too
	dhcp := att.DHCPConfig
	if att.LB == nil || att.LB.ID != l.ID || att.LB.PrivateNetworkCount != 1 || att.PrivateNetworkID != pn.ID ||
		!slices.Equal(att.IpamIDs, []string{id}) || dhcp == nil || dhcp.IPID == nil || *dhcp.IPID != id ||
		att.Status != lb.PrivateNetworkStatusReady || att.CreatedAt == nil || att.UpdatedAt == nil {
		t.Fatalf("attachment %+v", att)
	}
	wantReservedIPAttached(t, srv, c, l, pn.ID, id)

	if err := detach(c, l.ID, pn.ID); err != nil {
		t.Fatal(err)
	}
	ip := mustGetIP(t, c, id)
	if ip.Resource != nil || !slices.Equal(ip.Tags, []string{"pool:general", "svc:web"}) {
		t.Fatalf("after detach: resource %+v tags %v", ip.Resource, ip.Tags)
	}
	if pns := lbPNs(t, c, l.ID); len(pns) != 0 {
		t.Fatalf("private networks after detach %+v", pns)
	}
	if snap := srv.LBs(); len(snap[0].PrivateNetworks) != 0 {
		t.Fatalf("LBs() after detach %+v", snap)
	}
	// Detaching again: not attached.
	err = detach(c, l.ID, pn.ID)
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "private_network" {
		t.Fatalf("%+v", nf)
	}

	if got := auditString(srv); got != "book: create_lb:CreateLB attach:AttachPrivateNetwork detach:DetachPrivateNetwork" {
		t.Fatalf("audit %s", got)
	}
	for _, ev := range srv.Audit()[2:] {
		if ev.LBID != l.ID || ev.IPID != id || ev.Resource == nil || ev.Resource.Type != "lb_server" || ev.Resource.ID != l.ID || ev.PrivateNetworkID != pn.ID {
			t.Fatalf("event %+v", ev)
		}
	}
	// The IP is free again: another Load Balancer can have it.
	other := mustLB(t, c, "other")
	if _, err := attach(c, other.ID, pn.ID, id); err != nil {
		t.Fatal(err)
	}
	wantLBResource(t, mustGetIP(t, c, id), other)
}

// wantReservedIPAttached checks that IPAM, the Load Balancer and the
// emulator all show the reserved IP id attached to l on network pnID, and
// that IPAM refuses to release it.
func wantReservedIPAttached(t *testing.T, srv *Server, c clients, l *lb.LB, pnID, id string) {
	t.Helper()
	ip := mustGetIP(t, c, id)
	wantLBResource(t, ip, l)
	if !slices.Equal(ip.Tags, []string{"pool:general", "svc:web"}) || addrOf(ip) != "10.0.0.50/24" {
		t.Fatalf("IP %s tags %v", addrOf(ip), ip.Tags)
	}
	// IPAM itself now refuses to release it.
	err := c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: id})
	errAs[*scw.PreconditionFailedError](t, err)

	pns := lbPNs(t, c, l.ID)
	if len(pns) != 1 || pns[0].PrivateNetworkID != pnID || !slices.Equal(pns[0].IpamIDs, []string{id}) || pns[0].LB.ID != l.ID {
		t.Fatalf("private networks %+v", pns)
	}
	if got, _ := c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: l.ID}); got.PrivateNetworkCount != 1 {
		t.Fatalf("private_network_count %d", got.PrivateNetworkCount)
	}
	if snap := srv.LBs(); len(snap) != 1 || snap[0].PrivateNetworks[pnID] != id || len(snap[0].PrivateNetworks) != 1 {
		t.Fatalf("LBs() %+v", snap)
	}
}

func TestLBAttachDHCP(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "cluster", "10.0.0.0/24")
	mustAddIP(t, srv, pn.ID, "", nil, nil) // takes 10.0.0.2
	l := mustLB(t, c, "dhcp")

	att, err := attach(c, l.ID, pn.ID)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the API still answers dhcp_config, and the CCM reads it: the emulator must too
	if len(att.IpamIDs) != 1 || att.DHCPConfig == nil || att.DHCPConfig.IPID == nil || *att.DHCPConfig.IPID != att.IpamIDs[0] {
		t.Fatalf("attachment %+v", att)
	}
	id := att.IpamIDs[0]
	ip := mustGetIP(t, c, id)
	wantLBResource(t, ip, l)
	if addrOf(ip) != "10.0.0.3/24" || len(ip.Tags) != 0 || ip.Tags == nil {
		t.Fatalf("DHCP IP %s tags %#v", addrOf(ip), ip.Tags)
	}
	resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{PrivateNetworkID: &pn.ID, ResourceType: ipam.ResourceTypeLBServer, ResourceID: &l.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp.IPs); !slices.Equal(got, []string{id}) {
		t.Fatalf("IPs of the LB %v, want %s", got, id)
	}

	if err := detach(c, l.ID, pn.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "ip" {
		t.Fatalf("%+v", nf)
	}
	if n := len(srv.IPs()); n != 1 {
		t.Fatalf("%d IPs left, want the seeded one", n)
	}
	if got := auditString(srv); got != "book: create_lb:CreateLB book:AttachPrivateNetwork attach:AttachPrivateNetwork detach:DetachPrivateNetwork release:DetachPrivateNetwork" {
		t.Fatalf("audit %s", got)
	}
}

func TestLBDeleteDetachesPrivateNetworks(t *testing.T) {
	srv, c := setup(t)
	pnA := mustPN(t, srv, "a", "10.1.0.0/24")
	pnB := mustPN(t, srv, "b", "10.2.0.0/24")
	reserved := mustAddIP(t, srv, pnA.ID, "10.1.0.9", []string{"keep"}, nil)
	l := mustLB(t, c, "doomed")
	if _, err := attach(c, l.ID, pnA.ID, reserved); err != nil {
		t.Fatal(err)
	}
	att, err := attach(c, l.ID, pnB.ID)
	if err != nil {
		t.Fatal(err)
	}
	dhcpID := att.IpamIDs[0]
	if pns := lbPNs(t, c, l.ID); len(pns) != 2 || pns[0].PrivateNetworkID != pnA.ID || pns[1].PrivateNetworkID != pnB.ID {
		t.Fatalf("private networks %+v", pns)
	}

	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: l.ID}); err != nil {
		t.Fatal(err)
	}
	ip := mustGetIP(t, c, reserved)
	if ip.Resource != nil || !slices.Equal(ip.Tags, []string{"keep"}) {
		t.Fatalf("reserved IP after delete: %+v %v", ip.Resource, ip.Tags)
	}
	if _, ok := srv.IP(dhcpID); ok {
		t.Fatal("the DHCP IP outlived its Load Balancer")
	}
	if len(srv.LBs()) != 0 {
		t.Fatalf("LBs() %+v", srv.LBs())
	}
	// Without a delay the deletion is accepted and done in the one call:
	// accepted first, then its networks detached, then gone.
	evs := srv.Audit()
	var tail []string
	for _, ev := range evs[len(evs)-5:] {
		if ev.Op != OpDeleteLB || ev.LBID != l.ID {
			t.Fatalf("event %+v", ev)
		}
		tail = append(tail, string(ev.Kind)+":"+ev.IPID)
	}
	want := []string{"delete_lb:", "detach:" + reserved, "detach:" + dhcpID, "release:" + dhcpID, "lb_gone:"}
	if !slices.Equal(tail, want) {
		t.Fatalf("audit tail %v, want %v", tail, want)
	}
	// Private Network b is empty again.
	if err := c.vpc.DeletePrivateNetwork(&vpc.DeletePrivateNetworkRequest{PrivateNetworkID: pnB.ID}); err != nil {
		t.Fatalf("deleting the emptied Private Network: %v", err)
	}
}

func TestLBAttachRefusals(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "cluster", "10.0.0.0/24")
	other := mustPN(t, srv, "other", "10.9.0.0/24")
	id := mustAddIP(t, srv, pn.ID, "10.0.0.20", nil, nil)
	vmIP := mustAddIP(t, srv, pn.ID, "10.0.0.21", nil, &Resource{Type: "instance_server", ID: "vm-1", Name: "vm"})
	elsewhere := mustAddIP(t, srv, other.ID, "10.9.0.20", nil, nil)
	a, b := mustLB(t, c, "a"), mustLB(t, c, "b")
	if _, err := attach(c, a.ID, pn.ID, id); err != nil {
		t.Fatal(err)
	}
	before := len(srv.Audit())

	// An IP attached to another Load Balancer, or to anything else.
	_, err := attach(c, b.ID, pn.ID, id)
	re := wantResponseError(t, err, 409, "already_exists")
	if re.Resource != "ip" || !strings.Contains(string(re.RawBody), a.ID) {
		t.Fatalf("%+v %s", re, re.RawBody)
	}
	_, err = attach(c, b.ID, pn.ID, vmIP)
	wantResponseError(t, err, 409, "already_exists")
	// A Private Network already attached to this Load Balancer.
	_, err = attach(c, a.ID, pn.ID)
	if re := wantResponseError(t, err, 409, "already_exists"); re.Resource != "private_network" {
		t.Fatalf("%+v", re)
	}
	// Unknown Load Balancer, Private Network, IP.
	_, err = attach(c, unknownID, pn.ID, id)
	wantLBNotFound(t, err, "lbs")
	_, err = attach(c, b.ID, unknownID)
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "private_network" || nf.ResourceID != unknownID {
		t.Fatalf("%+v", nf)
	}
	_, err = attach(c, b.ID, pn.ID, unknownID)
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "ip" {
		t.Fatalf("%+v", nf)
	}
	// An IP of another Private Network; two IPs.
	_, err = attach(c, b.ID, pn.ID, elsewhere)
	errAs[*scw.InvalidArgumentsError](t, err)
	_, err = attach(c, b.ID, pn.ID, elsewhere, id)
	errAs[*scw.InvalidArgumentsError](t, err)
	err = detach(c, unknownID, pn.ID)
	wantLBNotFound(t, err, "lbs")

	// Nothing changed.
	if n := len(srv.Audit()); n != before {
		t.Fatalf("%d audit events after refusals", n-before)
	}
	wantLBResource(t, mustGetIP(t, c, id), a)
	if pns := lbPNs(t, c, b.ID); len(pns) != 0 {
		t.Fatalf("b attached %+v", pns)
	}
	if n := len(srv.IPs()); n != 3 {
		t.Fatalf("%d IPs", n)
	}
}

func TestListIPsOfALoadBalancer(t *testing.T) {
	srv, c := setup(t)
	pnA := mustPN(t, srv, "a", "10.1.0.0/24")
	pnB := mustPN(t, srv, "b", "10.2.0.0/24")
	a1 := mustAddIP(t, srv, pnA.ID, "10.1.0.10", nil, nil)
	a2 := mustAddIP(t, srv, pnA.ID, "10.1.0.11", nil, nil)
	b1 := mustAddIP(t, srv, pnB.ID, "10.2.0.10", nil, nil)
	l := mustLB(t, c, "ccm")
	if _, err := attach(c, l.ID, pnA.ID, a1); err != nil {
		t.Fatal(err)
	}
	list := func(pnID string, ipIDs ...string) []*ipam.IP {
		t.Helper()
		resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{PrivateNetworkID: &pnID, IPIDs: ipIDs}, scw.WithAllPages())
		if err != nil {
			t.Fatal(err)
		}
		if int(resp.TotalCount) != len(resp.IPs) {
			t.Fatalf("total_count %d for %d IPs", resp.TotalCount, len(resp.IPs))
		}
		return resp.IPs
	}
	got := list(pnA.ID, a1, b1)
	if !slices.Equal(ids(got), []string{a1}) {
		t.Fatalf("pn A, ids a1 b1: %v", ids(got))
	}
	wantLBResource(t, got[0], l)
	if got := sorted(ids(list(pnA.ID, a1, a2))); !slices.Equal(got, sorted([]string{a1, a2})) {
		t.Fatalf("pn A, ids a1 a2: %v", got)
	}
	if got := list(pnB.ID, a1, a2); len(got) != 0 {
		t.Fatalf("pn B, ids a1 a2: %v", ids(got))
	}
	if got := list(pnA.ID, unknownID); len(got) != 0 {
		t.Fatalf("unknown id: %v", ids(got))
	}
}
