package emulator

import (
	"strings"
	"testing"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	clocktesting "k8s.io/utils/clock/testing"
)

// listFilterCase is a ListIPs request and the names of the IPs it lists.
type listFilterCase struct {
	name string
	req  ipam.ListIPsRequest
	want string
}

// listFilterCases are TestListIPsFilters's: pnA, dual-stack, holds a1 to
// a3, and a network of the VPC vpcID holds b1 and b2.
func listFilterCases(pnA PrivateNetwork, vpcID, a1, b2 string) []listFilterCase {
	return []listFilterCase{
		{"all", ipam.ListIPsRequest{}, "a1 a2 a3 b1 b2"},
		{"private network", ipam.ListIPsRequest{PrivateNetworkID: &pnA.ID}, "a1 a2 a3"},
		{"subnet", ipam.ListIPsRequest{SubnetID: &pnA.Subnets[0].ID}, "a1 a2"},
		{"vpc", ipam.ListIPsRequest{VpcID: &vpcID}, "b1 b2"},
		{"tag", ipam.ListIPsRequest{Tags: []string{"x"}}, "a1 a3"},
		{"tags are ORed", ipam.ListIPsRequest{Tags: []string{"x", "z"}}, "a1 a2 a3 b2"},
		{"unknown tag", ipam.ListIPsRequest{Tags: []string{"nope"}}, ""},
		{"attached", ipam.ListIPsRequest{Attached: scw.BoolPtr(true)}, "a2 b1"},
		{"not attached", ipam.ListIPsRequest{Attached: scw.BoolPtr(false)}, "a1 a3 b2"},
		{"IPv6", ipam.ListIPsRequest{IsIPv6: scw.BoolPtr(true)}, "a3"},
		{"IPv4", ipam.ListIPsRequest{IsIPv6: scw.BoolPtr(false)}, "a1 a2 b1 b2"},
		{"resource type", ipam.ListIPsRequest{ResourceType: ipam.ResourceTypeLBServer}, "b1"},
		{"resource types", ipam.ListIPsRequest{ResourceTypes: []ipam.ResourceType{ipam.ResourceTypeCustom, ipam.ResourceTypeLBServer}}, "a2 b1"},
		{"resource id", ipam.ListIPsRequest{ResourceID: scw.StringPtr("lb-1")}, "b1"},
		{"resource ids", ipam.ListIPsRequest{ResourceIDs: []string{"lb-1", "other"}}, "b1"},
		{"resource name contains", ipam.ListIPsRequest{ResourceName: scw.StringPtr("front")}, "b1"},
		{"mac address ignores case", ipam.ListIPsRequest{MacAddress: scw.StringPtr("aa:bb:cc:00:00:01")}, "a2"},
		{"ip ids", ipam.ListIPsRequest{IPIDs: []string{a1, b2}}, "a1 b2"},
		{"project", ipam.ListIPsRequest{ProjectID: scw.StringPtr(testProject)}, "a1 a2 a3 b1 b2"},
		{"other project", ipam.ListIPsRequest{ProjectID: scw.StringPtr(unknownID)}, ""},
		{"organization", ipam.ListIPsRequest{OrganizationID: scw.StringPtr(testProject)}, "a1 a2 a3 b1 b2"},
		{"combined", ipam.ListIPsRequest{PrivateNetworkID: &pnA.ID, Tags: []string{"z"}}, "a2"},
		{"zonal IPs: none", ipam.ListIPsRequest{Zonal: scw.StringPtr("fr-par-1")}, ""},
	}
}

func TestListIPsFilters(t *testing.T) {
	srv, c := setup(t)
	pnA := mustPN(t, srv, "a", "10.1.0.0/24")
	vpc2, err := c.vpc.CreateVPC(vpcReq("other"))
	if err != nil {
		t.Fatal(err)
	}
	pnB, err := c.vpc.CreatePrivateNetwork(pnReq(t, "b", vpc2.ID, "10.2.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	add := func(name, pnID, addr string, tags []string, res *Resource) string {
		id := mustAddIP(t, srv, pnID, addr, tags, res)
		names[id] = name
		return id
	}
	a1 := add("a1", pnA.ID, "10.1.0.10", []string{"x"}, nil)
	add("a2", pnA.ID, "10.1.0.11", []string{"y", "z"}, &Resource{Name: "web-1", MACAddress: "AA:BB:CC:00:00:01"})
	add("a3", pnA.ID, pnA.Subnets[1].Prefix.Addr().Next().Next().String(), []string{"x"}, nil)
	add("b1", pnB.ID, "10.2.0.10", nil, &Resource{Type: "lb_server", ID: "lb-1", Name: "lb-front"})
	b2 := add("b2", pnB.ID, "10.2.0.11", []string{"z"}, nil)

	for _, tt := range listFilterCases(pnA, vpc2.ID, a1, b2) {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.ipam.ListIPs(&tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ip := range resp.IPs {
				got = append(got, names[ip.ID])
			}
			if g := strings.Join(sorted(got), " "); g != tt.want || int(resp.TotalCount) != len(got) {
				t.Fatalf("got %q (total %d), want %q", g, resp.TotalCount, tt.want)
			}
		})
	}
}

// TestListIPsFiltersBadValues: a filter or an order the API does not know
// is refused.
func TestListIPsFiltersBadValues(t *testing.T) {
	srv, _ := setup(t)
	if got := raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips?attached=maybe", "", testSecretKey); got.status != 400 {
		t.Fatalf("bad bool: %d %s", got.status, got.body)
	}
	if got := raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips?order_by=size_asc", "", testSecretKey); got.status != 400 {
		t.Fatalf("bad order: %d %s", got.status, got.body)
	}
}

func TestListIPsPaging(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	for range 120 {
		again(t, srv, pn.ID)
	}
	seen := map[string]bool{}
	for page, want := range []int{50, 50, 20, 0} {
		resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{Page: scw.Int32Ptr(int32(page + 1)), PageSize: scw.Uint32Ptr(50)})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.IPs) != want || resp.TotalCount != 120 {
			t.Fatalf("page %d: %d IPs, total %d", page+1, len(resp.IPs), resp.TotalCount)
		}
		for _, ip := range resp.IPs {
			if seen[ip.ID] {
				t.Fatalf("%s on two pages", ip.ID)
			}
			seen[ip.ID] = true
		}
	}
	if resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{}); err != nil || len(resp.IPs) != 50 {
		t.Fatalf("default page size: %v", err)
	}
	all, err := c.ipam.ListIPs(&ipam.ListIPsRequest{PageSize: scw.Uint32Ptr(7)}, scw.WithAllPages())
	if err != nil || len(all.IPs) != 120 || all.TotalCount != 120 {
		t.Fatalf("all pages: %v", err)
	}
	if _, err := c.ipam.ListIPs(&ipam.ListIPsRequest{PageSize: scw.Uint32Ptr(1000)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ipam.ListIPs(&ipam.ListIPsRequest{PageSize: scw.Uint32Ptr(1001)})
	wantInvalid("page_size")(t, err)
	_, err = c.ipam.ListIPs(&ipam.ListIPsRequest{Page: scw.Int32Ptr(0)})
	wantInvalid("page")(t, err)
}

// TestListIPsPagesSeeWrites: the pages of one listing come from a cache
// of its matches; a booking, a tag change, an attachment or a release
// between two pages shows on the next, as on the real API.
func TestListIPsPagesSeeWrites(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	var idList []string
	for range 10 {
		idList = append(idList, again(t, srv, pn.ID))
	}
	tagged := func(want int, step string) {
		t.Helper()
		resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{Tags: []string{"mine"}, Page: scw.Int32Ptr(2), PageSize: scw.Uint32Ptr(2)})
		if err != nil {
			t.Fatal(err)
		}
		if int(resp.TotalCount) != want {
			t.Fatalf("after %s: total_count %d, want %d", step, resp.TotalCount, want)
		}
	}
	tagged(0, "no tag")
	for i, id := range idList[:4] {
		if _, err := c.ipam.UpdateIP(&ipam.UpdateIPRequest{IPID: id, Tags: &[]string{"mine"}}); err != nil {
			t.Fatal(err)
		}
		tagged(i+1, "a tag")
	}
	if err := c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: idList[0]}); err != nil {
		t.Fatal(err)
	}
	tagged(3, "a release")
	mustAddIP(t, srv, pn.ID, "172.16.33.1", []string{"mine"}, nil)
	tagged(4, "a booking")
	attached := func() uint64 {
		t.Helper()
		resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{Tags: []string{"mine"}, Attached: scw.BoolPtr(true)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.TotalCount
	}
	if n := attached(); n != 0 {
		t.Fatalf("%d attached before any attachment", n)
	}
	if _, err := c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: idList[1], Resource: &ipam.CustomResource{MacAddress: "0a:00:00:00:00:02"}}); err != nil {
		t.Fatal(err)
	}
	if n := attached(); n != 1 {
		t.Fatalf("%d attached after an attachment, want 1", n)
	}
}

// bookOverTime books ip1 to ip4 in a network, then updates and attaches
// some, each step a second after the one before, so that every order of
// ListIPs lists them differently; names maps their IDs to ip1 to ip4.
func bookOverTime(t *testing.T) (clients, map[string]string) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	srv, c := setup(t, func(o *Options) { o.Clock = clk })
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	names := map[string]string{}
	at := func(sec int) { clk.SetTime(t0.Add(time.Duration(sec) * time.Second)) }
	book := func(name, addr string) string {
		ip, err := c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn.ID}, Address: ptrIP(addr)})
		if err != nil {
			t.Fatal(err)
		}
		names[ip.ID] = name
		return ip.ID
	}
	ip1 := book("ip1", "10.0.0.20")
	ip2 := book("ip2", "10.0.0.10") // same created_at as ip1: booked later wins ties
	at(1)
	ip3 := book("ip3", "10.0.0.30")
	at(2)
	book("ip4", "10.0.0.5")
	at(3)
	if _, err := c.ipam.UpdateIP(&ipam.UpdateIPRequest{IPID: ip1, Tags: &[]string{"t"}}); err != nil {
		t.Fatal(err)
	}
	at(4)
	if _, err := c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: ip3, Resource: &ipam.CustomResource{MacAddress: "0a:00:00:00:00:02"}}); err != nil {
		t.Fatal(err)
	}
	at(5)
	if _, err := c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: ip2, Resource: &ipam.CustomResource{MacAddress: "0A:00:00:00:00:01"}}); err != nil {
		t.Fatal(err)
	}
	return c, names
}

func TestListIPsOrder(t *testing.T) {
	c, names := bookOverTime(t)
	for order, want := range map[ipam.ListIPsRequestOrderBy]string{
		"":                                       "ip4 ip3 ip2 ip1", // created_at_desc
		ipam.ListIPsRequestOrderByCreatedAtDesc:  "ip4 ip3 ip2 ip1",
		ipam.ListIPsRequestOrderByCreatedAtAsc:   "ip1 ip2 ip3 ip4",
		ipam.ListIPsRequestOrderByUpdatedAtAsc:   "ip4 ip1 ip3 ip2",
		ipam.ListIPsRequestOrderByUpdatedAtDesc:  "ip2 ip3 ip1 ip4",
		ipam.ListIPsRequestOrderByAttachedAtAsc:  "ip1 ip4 ip3 ip2",
		ipam.ListIPsRequestOrderByAttachedAtDesc: "ip2 ip3 ip4 ip1",
		ipam.ListIPsRequestOrderByIPAddressAsc:   "ip4 ip2 ip1 ip3",
		ipam.ListIPsRequestOrderByIPAddressDesc:  "ip3 ip1 ip2 ip4",
		ipam.ListIPsRequestOrderByMacAddressAsc:  "ip1 ip4 ip2 ip3",
		ipam.ListIPsRequestOrderByMacAddressDesc: "ip3 ip2 ip4 ip1",
	} {
		for _, size := range []uint32{50, 3} { // one page, and across pages
			var got []string
			for page := int32(1); page <= 2; page++ {
				resp, err := c.ipam.ListIPs(&ipam.ListIPsRequest{OrderBy: order, Page: &page, PageSize: &size})
				if err != nil {
					t.Fatal(err)
				}
				for _, ip := range resp.IPs {
					got = append(got, names[ip.ID])
				}
			}
			if g := strings.Join(got, " "); g != want {
				t.Errorf("order_by %q page size %d: %s, want %s", order, size, g, want)
			}
		}
	}
}
