package emulator

import (
	"strings"
	"testing"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

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

	productAttachIsNotCustom(t, srv, c, id, vm1)

	var kinds []string
	for _, ev := range srv.Audit() {
		kinds = append(kinds, string(ev.Kind))
	}
	if got := strings.Join(kinds, " "); got != "book attach detach attach detach attach detach attach detach" {
		t.Fatalf("audit: %s", got)
	}
}

// productAttachIsNotCustom: an IP a product attached (here to vm1's MAC)
// cannot be detached as a custom resource, nor attached twice; detached,
// it cannot be detached again.
func productAttachIsNotCustom(t *testing.T, srv *Server, c clients, id string, vm1 *ipam.CustomResource) {
	t.Helper()
	if err := srv.Attach(id, Resource{Type: "lb_server", ID: "lb-1", MACAddress: vm1.MacAddress}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ipam.DetachIP(&ipam.DetachIPRequest{IPID: id, Resource: vm1})
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
}
