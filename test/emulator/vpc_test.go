package emulator

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	vpc "github.com/scaleway/scaleway-sdk-go/api/vpc/v2"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

func vpcReq(name string) *vpc.CreateVPCRequest {
	return &vpc.CreateVPCRequest{Name: name, Tags: []string{}}
}

// pnReq asks for a Private Network in vpcID ("" for the default VPC) with
// the given subnets (none: the API chooses).
func pnReq(t *testing.T, name, vpcID string, subnets ...string) *vpc.CreatePrivateNetworkRequest {
	t.Helper()
	req := &vpc.CreatePrivateNetworkRequest{Name: name, Tags: []string{}}
	if vpcID != "" {
		req.VpcID = &vpcID
	}
	for _, s := range subnets {
		req.Subnets = append(req.Subnets, ipNet(t, s))
	}
	return req
}

func subnetStrings(pn *vpc.PrivateNetwork) []string {
	var out []string
	for _, s := range pn.Subnets {
		out = append(out, s.Subnet.String())
	}
	return out
}

func TestVPCLifecycle(t *testing.T) {
	srv, c := setup(t)
	v := newCheckedVPC(t, srv, c)
	pn1, pn2 := newAutoSubnetPNs(t, c, v)
	_, err := c.vpc.CreatePrivateNetwork(pnReq(t, "overlap", v.ID, "172.16.17.0/24"))
	wantInvalid("subnets.0")(t, err)
	if got := raw(t, srv, "POST", "/vpc/v2/regions/fr-par/private-networks", `{"name":"host bits","subnets":["10.0.0.1/24"]}`, testSecretKey); got.status != 400 {
		t.Fatalf("host bits: %d %s", got.status, got.body)
	}
	_, err = c.vpc.CreatePrivateNetwork(pnReq(t, "unknown vpc", unknownID))
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "vpc" {
		t.Fatalf("%+v", nf)
	}
	if v, err = c.vpc.GetVPC(&vpc.GetVPCRequest{VpcID: v.ID}); err != nil || v.PrivateNetworkCount != 2 {
		t.Fatalf("count %d, %v", v.PrivateNetworkCount, err)
	}

	err = c.vpc.DeleteVPC(&vpc.DeleteVPCRequest{VpcID: v.ID})
	if pf := errAs[*scw.PreconditionFailedError](t, err); pf.Precondition != "resource_still_in_use" || pf.HelpMessage != "VPC must be empty to be deleted" {
		t.Fatalf("%+v", pf)
	}

	emptyThenDeleteVPC(t, srv, c, v, pn1, pn2)
}

// newCheckedVPC creates a VPC, checks its fields in the SDK's answer and
// in the JSON, and enables its custom routes propagation.
func newCheckedVPC(t *testing.T, srv *Server, c clients) *vpc.VPC {
	t.Helper()
	v, err := c.vpc.CreateVPC(&vpc.CreateVPCRequest{Name: "my vpc", Tags: []string{"t"}, EnableTransitivity: true})
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "my vpc" || v.ProjectID != testProject || v.OrganizationID != testProject || v.IsDefault ||
		!v.RoutingEnabled || !v.CustomRoutesPropagationEnabled || !v.TransitivityEnabled || v.PrivateNetworkCount != 0 || v.Region != scw.RegionFrPar {
		t.Fatalf("vpc = %+v", v)
	}
	got := raw(t, srv, "GET", "/vpc/v2/regions/fr-par/vpcs/"+v.ID, "", testSecretKey).json(t)
	for _, k := range []string{"created_at", "custom_routes_propagation_enabled", "id", "is_default", "name", "organization_id", "private_network_count", "project_id", "region", "routing_enabled", "s3_integration_enabled", "tags", "transitivity_enabled", "updated_at"} {
		if _, ok := got[k]; !ok {
			t.Errorf("VPC has no %q", k)
		}
	}
	if len(got) != 14 {
		t.Errorf("VPC has %d keys: %v", len(got), got)
	}
	if v, err = c.vpc.EnableCustomRoutesPropagation(&vpc.EnableCustomRoutesPropagationRequest{VpcID: v.ID}); err != nil || !v.CustomRoutesPropagationEnabled {
		t.Fatalf("enable: %v", err)
	}
	return v
}

// newAutoSubnetPNs creates two Private Networks in v without subnets: they
// get 172.16.16.0/22 then 172.16.20.0/22, each with a ULA /64, both /64s
// from one /48.
func newAutoSubnetPNs(t *testing.T, c clients, v *vpc.VPC) (*vpc.PrivateNetwork, *vpc.PrivateNetwork) {
	t.Helper()
	pn1, err := c.vpc.CreatePrivateNetwork(pnReq(t, "one", v.ID))
	if err != nil {
		t.Fatal(err)
	}
	pn2, err := c.vpc.CreatePrivateNetwork(pnReq(t, "two", v.ID))
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := subnetStrings(pn1), subnetStrings(pn2)
	if len(s1) != 2 || s1[0] != "172.16.16.0/22" || len(s2) != 2 || s2[0] != "172.16.20.0/22" {
		t.Fatalf("auto subnets %v %v, want 172.16.16.0/22 then 172.16.20.0/22, each with a /64", s1, s2)
	}
	for _, pn := range []*vpc.PrivateNetwork{pn1, pn2} {
		p := netip.MustParsePrefix(pn.Subnets[1].Subnet.String())
		if p.Bits() != 64 || !netip.MustParsePrefix("fd00::/8").Contains(p.Addr()) {
			t.Fatalf("IPv6 subnet %s is not a ULA /64", p)
		}
		if !pn.DHCPEnabled || pn.VpcID != v.ID || pn.Subnets[0].PrivateNetworkID != pn.ID || pn.Subnets[0].VpcID != v.ID || pn.Subnets[0].Region != scw.RegionFrPar {
			t.Fatalf("pn = %+v", pn)
		}
	}
	a1, a2 := netip.MustParsePrefix(s1[1]).Addr().As16(), netip.MustParsePrefix(s2[1]).Addr().As16()
	if [6]byte(a1[:6]) != [6]byte(a2[:6]) {
		t.Fatalf("%s and %s: one organization's /64s come from one /48", s1[1], s2[1])
	}
	return pn1, pn2
}

// emptyThenDeleteVPC: a Private Network holding an IP is not deleted; once
// empty it is, then its subnets are gone, and then v is deleted.
func emptyThenDeleteVPC(t *testing.T, srv *Server, c clients, v *vpc.VPC, pn1, pn2 *vpc.PrivateNetwork) {
	t.Helper()
	ip, err := c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn1.ID}})
	if err != nil || addrOf(ip) != "172.16.16.2/22" {
		t.Fatalf("ip=%v err=%v", ip, err)
	}
	wantBody(t, raw(t, srv, "DELETE", "/vpc/v2/regions/fr-par/private-networks/"+pn1.ID, "", testSecretKey), 412,
		`{"help_message":"Private Network must be empty to be deleted","message":"precondition is not respected","precondition":"resource_still_in_use","type":"precondition_failed"}`)
	if err := c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: ip.ID}); err != nil {
		t.Fatal(err)
	}
	for _, pn := range []*vpc.PrivateNetwork{pn1, pn2} {
		if err := c.vpc.DeletePrivateNetwork(&vpc.DeletePrivateNetworkRequest{PrivateNetworkID: pn.ID}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.vpc.GetPrivateNetwork(&vpc.GetPrivateNetworkRequest{PrivateNetworkID: pn1.ID})
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "private_network" || nf.ResourceID != pn1.ID {
		t.Fatalf("%+v", nf)
	}
	_, err = c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{SubnetID: &pn1.Subnets[0].ID}})
	errAs[*scw.ResourceNotFoundError](t, err)
	if err := c.vpc.DeleteVPC(&vpc.DeleteVPCRequest{VpcID: v.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = c.vpc.GetVPC(&vpc.GetVPCRequest{VpcID: v.ID})
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "vpc" {
		t.Fatalf("%+v", nf)
	}
}

func TestDefaultVPC(t *testing.T) {
	srv, c := setup(t)
	seeded := mustPN(t, srv, "seeded", "10.0.0.0/24")
	pn, err := c.vpc.CreatePrivateNetwork(pnReq(t, "api", ""))
	if err != nil {
		t.Fatal(err)
	}
	if pn.VpcID != seeded.VPCID {
		t.Fatalf("VPC %s, want the default one %s", pn.VpcID, seeded.VPCID)
	}
	v, err := c.vpc.GetVPC(&vpc.GetVPCRequest{VpcID: pn.VpcID})
	if err != nil || !v.IsDefault || v.Name != "default" || v.PrivateNetworkCount != 2 {
		t.Fatalf("vpc=%+v err=%v", v, err)
	}
	if s := subnetStrings(pn); s[0] != "172.16.16.0/22" {
		t.Fatalf("subnets %v", s)
	}
	// A given IPv6 subnet replaces the generated one.
	own := mustPN(t, srv, "v6", "10.9.0.0/24", "fd00:1:2:3::/64")
	if len(own.Subnets) != 2 || own.Subnets[1].Prefix.String() != "fd00:1:2:3::/64" {
		t.Fatalf("subnets %+v", own.Subnets)
	}
	if _, err := srv.AddPrivateNetwork("overlap", "10.0.0.128/25"); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("overlap: %v", err)
	}
	if _, err := srv.AddPrivateNetwork("tiny", "10.8.0.0/31"); err == nil {
		t.Fatal("a /31 has no bookable address")
	}
}

func TestListPrivateNetworksAndSubnets(t *testing.T) {
	srv, c := setup(t)
	v, inV, other := fiveNetworksInAVPC(t, srv, c)
	for _, tt := range []struct {
		name string
		req  vpc.ListPrivateNetworksRequest
		want string
	}{
		{"all", vpc.ListPrivateNetworksRequest{}, "net-0 net-1 net-2 net-3 net-4 elsewhere 6"},
		{"by VPC", vpc.ListPrivateNetworksRequest{VpcID: &v.ID}, "net-0 net-1 net-2 net-3 net-4 5"},
		{"name contains", vpc.ListPrivateNetworksRequest{Name: scw.StringPtr("where")}, "elsewhere 1"},
		{"ids", vpc.ListPrivateNetworksRequest{PrivateNetworkIDs: []string{inV[1], other.ID}}, "net-1 elsewhere 2"},
		{"page 2", vpc.ListPrivateNetworksRequest{Page: scw.Int32Ptr(2), PageSize: scw.Uint32Ptr(4)}, "net-4 elsewhere 6"},
		{"name desc", vpc.ListPrivateNetworksRequest{OrderBy: vpc.ListPrivateNetworksRequestOrderByNameDesc, PageSize: scw.Uint32Ptr(2)}, "net-4 net-3 6"},
		{"other project", vpc.ListPrivateNetworksRequest{ProjectID: scw.StringPtr(unknownID)}, "0"},
	} {
		if got := strings.Join(pnNames(t, c, tt.req), " "); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}

	wantSubnetAndVPCListings(t, srv, c, v, other)
}

// fiveNetworksInAVPC creates a VPC v holding net-0 to net-4, whose IDs it
// returns in inV, and other, a Private Network of the default VPC.
func fiveNetworksInAVPC(t *testing.T, srv *Server, c clients) (v *vpc.VPC, inV []string, other PrivateNetwork) {
	t.Helper()
	v, err := c.vpc.CreateVPC(vpcReq("v"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		pn, err := c.vpc.CreatePrivateNetwork(pnReq(t, fmt.Sprintf("net-%d", i), v.ID))
		if err != nil {
			t.Fatal(err)
		}
		inV = append(inV, pn.ID)
	}
	other = mustPN(t, srv, "elsewhere", "10.0.0.0/24")
	return v, inV, other
}

// pnNames lists the Private Networks req asks for: their names, then the
// total count.
func pnNames(t *testing.T, c clients, req vpc.ListPrivateNetworksRequest) []string {
	t.Helper()
	resp, err := c.vpc.ListPrivateNetworks(&req)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pn := range resp.PrivateNetworks {
		out = append(out, pn.Name)
	}
	return append(out, fmt.Sprint(resp.TotalCount))
}

// wantSubnetAndVPCListings checks the listings of the subnets (of v, by ID,
// all in pages, by Private Network) and of the VPCs, after
// fiveNetworksInAVPC.
func wantSubnetAndVPCListings(t *testing.T, srv *Server, c clients, v *vpc.VPC, other PrivateNetwork) {
	t.Helper()
	subs, err := c.vpc.ListSubnets(&vpc.ListSubnetsRequest{VpcID: &v.ID})
	if err != nil || subs.TotalCount != 10 || len(subs.Subnets) != 10 || subs.Subnets[0].Subnet.String() != "172.16.16.0/22" {
		t.Fatalf("subnets of the VPC: %+v %v", subs, err)
	}
	subs, err = c.vpc.ListSubnets(&vpc.ListSubnetsRequest{SubnetIDs: []string{other.Subnets[0].ID}})
	if err != nil || subs.TotalCount != 1 || subs.Subnets[0].Subnet.String() != "10.0.0.0/24" || subs.Subnets[0].PrivateNetworkID != other.ID {
		t.Fatalf("by id: %+v %v", subs, err)
	}
	all, err := c.vpc.ListSubnets(&vpc.ListSubnetsRequest{PageSize: scw.Uint32Ptr(3)}, scw.WithAllPages())
	if err != nil || len(all.Subnets) != 12 {
		t.Fatalf("all subnets: %v", err)
	}
	byPN := raw(t, srv, "GET", "/vpc/v2/regions/fr-par/subnets?private_network_id="+other.ID, "", testSecretKey).json(t)
	if byPN["total_count"] != float64(2) {
		t.Fatalf("by private_network_id: %v", byPN)
	}
	vpcs, err := c.vpc.ListVPCs(&vpc.ListVPCsRequest{IsDefault: scw.BoolPtr(false)})
	if err != nil || vpcs.TotalCount != 1 || vpcs.Vpcs[0].ID != v.ID || vpcs.Vpcs[0].PrivateNetworkCount != 5 {
		t.Fatalf("vpcs: %+v %v", vpcs, err)
	}
	if vpcs, err = c.vpc.ListVPCs(&vpc.ListVPCsRequest{}); err != nil || vpcs.TotalCount != 2 {
		t.Fatalf("all vpcs: %+v %v", vpcs, err)
	}
}
