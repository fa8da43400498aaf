package scalewaytest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	clocktesting "k8s.io/utils/clock/testing"
)

func ptrIP(s string) *net.IP {
	ip := net.ParseIP(s)
	return &ip
}

func TestBookIP(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	v4, v6 := pn.Subnets[0], pn.Subnets[1]
	if !v6.Prefix.Addr().Is6() || v6.Prefix.Bits() != 64 {
		t.Fatalf("subnets = %+v, want an IPv6 /64 after the IPv4 one", pn.Subnets)
	}
	full := mustPN(t, srv, "full", "10.0.0.0/30") // IPAM's own four, nothing else
	taken := mustAddIP(t, srv, pn.ID, "172.16.32.7", nil, nil)
	v6Addr := v6.Prefix.Addr().Next().Next()

	byPN := func(r ipam.BookIPRequest) *ipam.BookIPRequest {
		r.Source = &ipam.Source{PrivateNetworkID: scw.StringPtr(pn.ID)}
		return &r
	}
	tests := []struct {
		name     string
		req      *ipam.BookIPRequest
		want     string // address in CIDR form; "" when an error is wanted
		wantSub  string
		checkErr func(t *testing.T, err error)
	}{
		{name: "lowest free from the third address", req: byPN(ipam.BookIPRequest{}), want: "172.16.32.2/22", wantSub: v4.ID},
		{name: "then the next", req: byPN(ipam.BookIPRequest{Tags: []string{"a", "b"}}), want: "172.16.32.3/22", wantSub: v4.ID},
		{name: "specific address", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.9")}), want: "172.16.32.9/22", wantSub: v4.ID},
		{name: "last bookable address", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.35.253")}), want: "172.16.35.253/22", wantSub: v4.ID},
		{name: "by subnet", req: &ipam.BookIPRequest{Source: &ipam.Source{SubnetID: scw.StringPtr(v4.ID)}, Address: ptrIP("172.16.33.1")}, want: "172.16.33.1/22", wantSub: v4.ID},
		{name: "IPv6 lowest free", req: byPN(ipam.BookIPRequest{IsIPv6: true}), want: netip.PrefixFrom(v6Addr, 64).String(), wantSub: v6.ID},
		{name: "IPv6 specific", req: byPN(ipam.BookIPRequest{IsIPv6: true, Address: ptrIP(v6Addr.Next().Next().String())}), want: netip.PrefixFrom(v6Addr.Next().Next(), 64).String(), wantSub: v6.ID},
		{name: "custom resource", req: byPN(ipam.BookIPRequest{Resource: &ipam.CustomResource{MacAddress: "02:00:00:00:00:01", Name: scw.StringPtr("vm")}}), want: "172.16.32.4/22", wantSub: v4.ID},
		{name: "address taken", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.7")}), checkErr: func(t *testing.T, err error) {
			re := wantResponseError(t, err, 409, "already_exists")
			want := fmt.Sprintf(`{"help_message":"address 172.16.32.7 is already booked in subnet 172.16.32.0/22","message":"resource already exists","resource":"ip","resource_id":"%s","type":"already_exists"}`, taken)
			if string(re.RawBody) != want {
				t.Fatalf("body %s\nwant %s", re.RawBody, want)
			}
		}},
		{name: "network address", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.0")}), checkErr: wantInvalid("address")},
		{name: "second address", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.1")}), checkErr: wantInvalid("address")},
		{name: "before last", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.35.254")}), checkErr: wantInvalid("address")},
		{name: "broadcast", req: byPN(ipam.BookIPRequest{Address: ptrIP("172.16.35.255")}), checkErr: wantInvalid("address")},
		{name: "outside the subnet", req: byPN(ipam.BookIPRequest{Address: ptrIP("10.9.9.9")}), checkErr: wantInvalid("address")},
		{name: "IPv6 address without is_ipv6", req: byPN(ipam.BookIPRequest{Address: ptrIP(v6Addr.String())}), checkErr: wantInvalid("address")},
		{name: "other project", req: byPN(ipam.BookIPRequest{ProjectID: unknownID}), checkErr: wantInvalid("project_id")},
		{name: "no source", req: &ipam.BookIPRequest{}, checkErr: wantInvalid("source")},
		{name: "bad MAC", req: byPN(ipam.BookIPRequest{Resource: &ipam.CustomResource{MacAddress: "nope"}}), checkErr: wantInvalid("resource.mac_address")},
		{name: "unknown Private Network", req: &ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: scw.StringPtr(unknownID)}}, checkErr: func(t *testing.T, err error) {
			nf := errAs[*scw.ResourceNotFoundError](t, err)
			if nf.Resource != "private_network" || nf.ResourceID != unknownID {
				t.Fatalf("%+v", nf)
			}
		}},
		{name: "unknown subnet", req: &ipam.BookIPRequest{Source: &ipam.Source{SubnetID: scw.StringPtr(unknownID)}}, checkErr: func(t *testing.T, err error) {
			if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "subnet" {
				t.Fatalf("%+v", nf)
			}
		}},
		{name: "no free address", req: &ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: scw.StringPtr(full.ID)}}, checkErr: func(t *testing.T, err error) {
			oos := errAs[*scw.OutOfStockError](t, err)
			if oos.Resource != "ip" || string(oos.RawBody) != `{"message":"resource is out of stock","resource":"ip","type":"out_of_stock"}` {
				t.Fatalf("%+v %s", oos, oos.RawBody)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, err := c.ipam.BookIP(tt.req)
			if tt.checkErr != nil {
				if err == nil {
					t.Fatalf("booked %s, want an error", addrOf(ip))
				}
				tt.checkErr(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if addrOf(ip) != tt.want || *ip.Source.SubnetID != tt.wantSub || ip.ProjectID != testProject || ip.Region != scw.RegionFrPar {
				t.Fatalf("got %s in %s (%s, %s), want %s in %s", addrOf(ip), *ip.Source.SubnetID, ip.ProjectID, ip.Region, tt.want, tt.wantSub)
			}
			if ip.Zone != nil || ip.Tags == nil || ip.Reverses == nil || ip.IsIPv6 != tt.req.IsIPv6 {
				t.Fatalf("ip = %+v", ip)
			}
			if tt.req.Resource != nil && (ip.Resource == nil || ip.Resource.Type != ipam.ResourceTypeCustom ||
				*ip.Resource.MacAddress != tt.req.Resource.MacAddress || *ip.Resource.Name != *tt.req.Resource.Name || ip.Resource.ID == "") {
				t.Fatalf("resource = %+v", ip.Resource)
			}
			if tt.req.Resource == nil && ip.Resource != nil {
				t.Fatalf("resource = %+v", ip.Resource)
			}
			if got, ok := srv.IP(ip.ID); !ok || got.Address.String() != tt.want {
				t.Fatalf("emulator holds %+v", got)
			}
		})
	}
}

func wantInvalid(argument string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		ia := errAs[*scw.InvalidArgumentsError](t, err)
		if len(ia.Details) != 1 || ia.Details[0].ArgumentName != argument || ia.Details[0].Reason != "constraint" || ia.Details[0].HelpMessage == "" {
			t.Fatalf("details %+v, want argument %s", ia.Details, argument)
		}
	}
}

func TestBookIPWireShape(t *testing.T) {
	srv, _ := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	got := raw(t, srv, "POST", "/ipam/v1/regions/fr-par/ips",
		fmt.Sprintf(`{"project_id":%q,"source":{"private_network_id":%q},"is_ipv6":false,"tags":null}`, testProject, pn.ID), testSecretKey)
	if got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	ip, _ := srv.IP(got.json(t)["id"].(string))
	created := ip.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z")
	want := fmt.Sprintf(`{"address":"172.16.32.2/22","created_at":%q,"id":%q,"is_ipv6":false,"project_id":%q,"region":"fr-par","resource":null,"reverses":[],"source":{"subnet_id":%q},"tags":[],"updated_at":%q,"zone":null}`,
		created, ip.ID, testProject, pn.Subnets[0].ID, created)
	wantBody(t, got, 200, want)
}

func TestGetIP(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	id := mustAddIP(t, srv, pn.ID, "172.16.32.9", []string{"x"}, nil)
	ip, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
	if err != nil || addrOf(ip) != "172.16.32.9/22" || ip.Tags[0] != "x" || ip.CreatedAt == nil {
		t.Fatalf("ip=%+v err=%v", ip, err)
	}
	_, err = c.ipam.GetIP(&ipam.GetIPRequest{IPID: unknownID})
	if nf := errAs[*scw.ResourceNotFoundError](t, err); nf.Resource != "ip" || nf.ResourceID != unknownID {
		t.Fatalf("%+v", nf)
	}
	wantBody(t, raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips/"+unknownID, "", testSecretKey), 404,
		`{"message":"resource is not found","resource":"ip","resource_id":"`+unknownID+`","type":"not_found"}`)
}

func TestUpdateIP(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 12, 8, 43, 36, 608200123, time.UTC))
	srv, c := setup(t, func(o *Options) { o.Clock = clk })
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	id := mustAddIP(t, srv, pn.ID, "172.16.32.9", []string{"a"}, nil)
	created := clk.Now().Truncate(time.Microsecond)
	path := "/ipam/v1/regions/fr-par/ips/" + id

	clk.SetTime(clk.Now().Add(time.Second))
	ip, err := c.ipam.UpdateIP(&ipam.UpdateIPRequest{IPID: id, Tags: &[]string{"a", "b"}})
	if err != nil || strings.Join(ip.Tags, ",") != "a,b" || !ip.CreatedAt.Equal(created) || !ip.UpdatedAt.Equal(created.Add(time.Second)) {
		t.Fatalf("ip=%+v err=%v", ip, err)
	}
	if got := raw(t, srv, "GET", path, "", testSecretKey).json(t); got["updated_at"] != "2026-03-12T08:43:37.608200Z" {
		t.Fatalf("updated_at %v: microseconds, UTC", got["updated_at"])
	}

	steps := []struct {
		name, body   string
		tags, hostsA string
	}{
		{"set reverses", `{"reverses":[{"hostname":"api.example.com","address":"172.16.32.9"}]}`, "a,b", "api.example.com"},
		{"reverses null leaves them", `{"tags":["c"],"reverses":null}`, "c", "api.example.com"},
		{"reverses absent leaves them", `{}`, "c", "api.example.com"},
		{"tags null leaves them", `{"tags":null}`, "c", "api.example.com"},
		{"reverses [] clears them", `{"reverses":[]}`, "c", ""},
		{"tags [] clears them", `{"tags":[]}`, "", ""},
	}
	for _, st := range steps {
		got := raw(t, srv, "PATCH", path, st.body, testSecretKey)
		if got.status != 200 {
			t.Fatalf("%s: %d %s", st.name, got.status, got.body)
		}
		ip, _ := srv.IP(id)
		var hosts []string
		for _, r := range ip.Reverses {
			hosts = append(hosts, r.Hostname)
		}
		if strings.Join(ip.Tags, ",") != st.tags || strings.Join(hosts, ",") != st.hostsA || ip.Tags == nil {
			t.Fatalf("%s: tags %q reverses %q", st.name, ip.Tags, hosts)
		}
	}
	if got := raw(t, srv, "PATCH", path, `{"reverses":[{"hostname":"x","address":"10.0.0.1"}]}`, testSecretKey); got.status != 400 {
		t.Fatalf("reverse outside the subnet: %d %s", got.status, got.body)
	}
	_, err = c.ipam.UpdateIP(&ipam.UpdateIPRequest{IPID: unknownID, Tags: &[]string{}})
	errAs[*scw.ResourceNotFoundError](t, err)

	var kinds []string
	for _, ev := range srv.Audit() {
		kinds = append(kinds, fmt.Sprintf("%s:%s", ev.Kind, ev.Op))
	}
	if got := strings.Join(kinds, " "); got != "book: tags:UpdateIP tags:UpdateIP tags:UpdateIP" {
		t.Fatalf("audit %s", got)
	}
}

func TestReleaseIP(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	id := mustAddIP(t, srv, pn.ID, "", nil, nil)
	if err := c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: id}); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.IP(id); ok {
		t.Fatal("still booked")
	}
	_, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
	errAs[*scw.ResourceNotFoundError](t, err)
	err = c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: id})
	errAs[*scw.ResourceNotFoundError](t, err)
	// The address is free again, and the lowest.
	if reused := mustAddIP(t, srv, pn.ID, "", nil, nil); mustIP(t, srv, reused).Address.IP.String() != "172.16.32.2" {
		t.Fatal("released address not reused")
	}

	attached := mustAddIP(t, srv, pn.ID, "", nil, &Resource{Type: "lb_server", ID: "lb-1", Name: "lb"})
	err = c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: attached})
	pf := errAs[*scw.PreconditionFailedError](t, err)
	if pf.Precondition != "resource_still_in_use" || pf.HelpMessage != "IP is attached to a resource, detach it first" {
		t.Fatalf("%+v", pf)
	}
	wantBody(t, raw(t, srv, "DELETE", "/ipam/v1/regions/fr-par/ips/"+attached, "{}", testSecretKey), 412,
		`{"help_message":"IP is attached to a resource, detach it first","message":"precondition is not respected","precondition":"resource_still_in_use","type":"precondition_failed"}`)
	wantBody(t, raw(t, srv, "DELETE", "/ipam/v1/regions/fr-par/ips/"+again(t, srv, pn.ID), "{}", testSecretKey), 204, "")
}

// again books one more IP for a test that only needs an ID.
func again(t *testing.T, srv *Server, pnID string) string {
	return mustAddIP(t, srv, pnID, "", nil, nil)
}

func mustIP(t *testing.T, srv *Server, id string) ipam.IP {
	t.Helper()
	ip, ok := srv.IP(id)
	if !ok {
		t.Fatalf("IP %s not booked", id)
	}
	return ip
}

func TestReleaseIPSetIsAllOrNothing(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	a, b := again(t, srv, pn.ID), again(t, srv, pn.ID)
	att := mustAddIP(t, srv, pn.ID, "", nil, &Resource{Type: "instance_server", Name: "vm"})

	err := c.ipam.ReleaseIPSet(&ipam.ReleaseIPSetRequest{IPIDs: []string{a, att, b}})
	errAs[*scw.PreconditionFailedError](t, err)
	err = c.ipam.ReleaseIPSet(&ipam.ReleaseIPSetRequest{IPIDs: []string{a, unknownID}})
	errAs[*scw.ResourceNotFoundError](t, err)
	if n := len(srv.IPs()); n != 3 {
		t.Fatalf("%d IPs left after refused calls, want 3", n)
	}
	if err := srv.Detach(att); err != nil {
		t.Fatal(err)
	}
	if err := c.ipam.ReleaseIPSet(&ipam.ReleaseIPSetRequest{IPIDs: []string{a, att, b, a}}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.IPs()); n != 0 {
		t.Fatalf("%d IPs left", n)
	}
	if err := c.ipam.ReleaseIPSet(&ipam.ReleaseIPSetRequest{IPIDs: []string{}}); err != nil {
		t.Fatal(err)
	}
}

func TestAttachDetachMove(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	id := again(t, srv, pn.ID)
	vm1 := &ipam.CustomResource{MacAddress: "02:00:00:00:00:01", Name: scw.StringPtr("vm-1")}
	vm2 := &ipam.CustomResource{MacAddress: "02:00:00:00:00:02"}

	ip, err := c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: id, Resource: vm1})
	if err != nil || ip.Resource == nil || ip.Resource.Type != ipam.ResourceTypeCustom || *ip.Resource.Name != "vm-1" || *ip.Resource.MacAddress != vm1.MacAddress {
		t.Fatalf("ip=%+v err=%v", ip, err)
	}
	first := ip.Resource.ID
	_, err = c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: id, Resource: vm2})
	errAs[*scw.PreconditionFailedError](t, err)
	_, err = c.ipam.DetachIP(&ipam.DetachIPRequest{IPID: id, Resource: vm2})
	errAs[*scw.PreconditionFailedError](t, err)

	// The MAC matches whatever its case.
	ip, err = c.ipam.MoveIP(&ipam.MoveIPRequest{IPID: id, FromResource: &ipam.CustomResource{MacAddress: "02:00:00:00:00:01"}, ToResource: vm2})
	if err != nil || ip.Resource == nil || *ip.Resource.MacAddress != vm2.MacAddress || ip.Resource.Name != nil || ip.Resource.ID == first {
		t.Fatalf("move: ip=%+v err=%v", ip, err)
	}
	ip, err = c.ipam.MoveIP(&ipam.MoveIPRequest{IPID: id, FromResource: &ipam.CustomResource{MacAddress: "02:00:00:00:00:02"}})
	if err != nil || ip.Resource != nil {
		t.Fatalf("move without a target detaches: ip=%+v err=%v", ip, err)
	}
	_, err = c.ipam.DetachIP(&ipam.DetachIPRequest{IPID: id, Resource: vm1})
	errAs[*scw.PreconditionFailedError](t, err)
	if _, err = c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: id, Resource: vm1}); err != nil {
		t.Fatal(err)
	}
	if ip, err = c.ipam.DetachIP(&ipam.DetachIPRequest{IPID: id, Resource: vm1}); err != nil || ip.Resource != nil {
		t.Fatalf("detach: ip=%+v err=%v", ip, err)
	}
	_, err = c.ipam.AttachIP(&ipam.AttachIPRequest{IPID: unknownID, Resource: vm1})
	errAs[*scw.ResourceNotFoundError](t, err)

	// An IP a product attached cannot be detached as a custom resource.
	if err := srv.Attach(id, Resource{Type: "lb_server", ID: "lb-1", MACAddress: vm1.MacAddress}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ipam.DetachIP(&ipam.DetachIPRequest{IPID: id, Resource: vm1})
	if pf := errAs[*scw.PreconditionFailedError](t, err); !strings.Contains(pf.HelpMessage, "lb_server") {
		t.Fatalf("%+v", pf)
	}
	if err := srv.Attach(id, Resource{Type: "lb_server"}); err == nil || !strings.Contains(err.Error(), "already attached") {
		t.Fatalf("attach twice: %v", err)
	}
	if err := srv.Detach(id); err != nil {
		t.Fatal(err)
	}
	if err := srv.Detach(id); err == nil {
		t.Fatal("detached twice")
	}

	var kinds []string
	for _, ev := range srv.Audit() {
		kinds = append(kinds, string(ev.Kind))
	}
	if got := strings.Join(kinds, " "); got != "book attach detach attach detach attach detach attach detach" {
		t.Fatalf("audit: %s", got)
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

	tests := []struct {
		name string
		req  ipam.ListIPsRequest
		want string
	}{
		{"all", ipam.ListIPsRequest{}, "a1 a2 a3 b1 b2"},
		{"private network", ipam.ListIPsRequest{PrivateNetworkID: &pnA.ID}, "a1 a2 a3"},
		{"subnet", ipam.ListIPsRequest{SubnetID: &pnA.Subnets[0].ID}, "a1 a2"},
		{"vpc", ipam.ListIPsRequest{VpcID: &vpc2.ID}, "b1 b2"},
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
	for _, tt := range tests {
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

func TestListIPsOrder(t *testing.T) {
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
