package emulator

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

// bookCase is a BookIP request, and the address and subnet it books, or
// checkErr for the error it gets.
type bookCase struct {
	name     string
	req      *ipam.BookIPRequest
	want     string // address in CIDR form; "" when an error is wanted
	wantSub  string
	checkErr func(t *testing.T, err error)
}

// bookNetworks are TestBookIP's: pn, dual-stack, with 172.16.32.7 taken,
// and full, whose subnet IPAM keeps whole.
type bookNetworks struct {
	pn, full PrivateNetwork
	v4, v6   Subnet
	taken    string
	v6Addr   netip.Addr // the lowest bookable IPv6 address of pn
}

func newBookNetworks(t *testing.T, srv *Server) bookNetworks {
	t.Helper()
	pn := mustPN(t, srv, "dc", "172.16.32.0/22")
	v4, v6 := pn.Subnets[0], pn.Subnets[1]
	if !v6.Prefix.Addr().Is6() || v6.Prefix.Bits() != 64 {
		t.Fatalf("subnets = %+v, want an IPv6 /64 after the IPv4 one", pn.Subnets)
	}
	full := mustPN(t, srv, "full", "10.0.0.0/30") // IPAM's own four, nothing else
	taken := mustAddIP(t, srv, pn.ID, "172.16.32.7", nil, nil)
	return bookNetworks{pn: pn, full: full, v4: v4, v6: v6, taken: taken, v6Addr: v6.Prefix.Addr().Next().Next()}
}

// byPN is r booked from pn.
func (n bookNetworks) byPN(r ipam.BookIPRequest) *ipam.BookIPRequest {
	r.Source = &ipam.Source{PrivateNetworkID: scw.StringPtr(n.pn.ID)}
	return &r
}

// bookedCases are TestBookIP's bookings, in order: each sees the ones
// before it booked.
func bookedCases(n bookNetworks) []bookCase {
	return []bookCase{
		{name: "lowest free from the third address", req: n.byPN(ipam.BookIPRequest{}), want: "172.16.32.2/22", wantSub: n.v4.ID},
		{name: "then the next", req: n.byPN(ipam.BookIPRequest{Tags: []string{"a", "b"}}), want: "172.16.32.3/22", wantSub: n.v4.ID},
		{name: "specific address", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.9")}), want: "172.16.32.9/22", wantSub: n.v4.ID},
		{name: "last bookable address", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.35.253")}), want: "172.16.35.253/22", wantSub: n.v4.ID},
		{name: "by subnet", req: &ipam.BookIPRequest{Source: &ipam.Source{SubnetID: scw.StringPtr(n.v4.ID)}, Address: ptrIP("172.16.33.1")}, want: "172.16.33.1/22", wantSub: n.v4.ID},
		{name: "IPv6 lowest free", req: n.byPN(ipam.BookIPRequest{IsIPv6: true}), want: netip.PrefixFrom(n.v6Addr, 64).String(), wantSub: n.v6.ID},
		{name: "IPv6 specific", req: n.byPN(ipam.BookIPRequest{IsIPv6: true, Address: ptrIP(n.v6Addr.Next().Next().String())}), want: netip.PrefixFrom(n.v6Addr.Next().Next(), 64).String(), wantSub: n.v6.ID},
		{name: "custom resource", req: n.byPN(ipam.BookIPRequest{Resource: &ipam.CustomResource{MacAddress: "02:00:00:00:00:01", Name: scw.StringPtr("vm")}}), want: "172.16.32.4/22", wantSub: n.v4.ID},
	}
}

// refusedCases are TestBookIP's refused bookings.
func refusedCases(n bookNetworks) []bookCase {
	return []bookCase{
		{name: "address taken", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.7")}), checkErr: func(t *testing.T, err error) {
			re := wantResponseError(t, err, 409, "already_exists")
			want := fmt.Sprintf(`{"help_message":"address 172.16.32.7 is already booked in subnet 172.16.32.0/22","message":"resource already exists","resource":"ip","resource_id":"%s","type":"already_exists"}`, n.taken)
			if string(re.RawBody) != want {
				t.Fatalf("body %s\nwant %s", re.RawBody, want)
			}
		}},
		{name: "network address", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.0")}), checkErr: wantInvalid("address")},
		{name: "second address", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.32.1")}), checkErr: wantInvalid("address")},
		{name: "before last", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.35.254")}), checkErr: wantInvalid("address")},
		{name: "broadcast", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("172.16.35.255")}), checkErr: wantInvalid("address")},
		{name: "outside the subnet", req: n.byPN(ipam.BookIPRequest{Address: ptrIP("10.9.9.9")}), checkErr: wantInvalid("address")},
		{name: "IPv6 address without is_ipv6", req: n.byPN(ipam.BookIPRequest{Address: ptrIP(n.v6Addr.String())}), checkErr: wantInvalid("address")},
		{name: "other project", req: n.byPN(ipam.BookIPRequest{ProjectID: unknownID}), checkErr: wantInvalid("project_id")},
		{name: "no source", req: &ipam.BookIPRequest{}, checkErr: wantInvalid("source")},
		{name: "bad MAC", req: n.byPN(ipam.BookIPRequest{Resource: &ipam.CustomResource{MacAddress: "nope"}}), checkErr: wantInvalid("resource.mac_address")},
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
		{name: "no free address", req: &ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: scw.StringPtr(n.full.ID)}}, checkErr: func(t *testing.T, err error) {
			oos := errAs[*scw.OutOfStockError](t, err)
			if oos.Resource != "ip" || string(oos.RawBody) != `{"message":"resource is out of stock","resource":"ip","type":"out_of_stock"}` {
				t.Fatalf("%+v %s", oos, oos.RawBody)
			}
		}},
	}
}

func TestBookIP(t *testing.T) {
	srv, c := setup(t)
	n := newBookNetworks(t, srv)
	for _, tt := range append(bookedCases(n), refusedCases(n)...) {
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
			wantBooked(t, srv, tt, ip)
		})
	}
}

// wantBooked checks ip, booked by tt, in the answer and in the emulator.
func wantBooked(t *testing.T, srv *Server, tt bookCase, ip *ipam.IP) {
	t.Helper()
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
