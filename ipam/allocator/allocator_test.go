package allocator

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

var countedOps = []emulator.Op{emulator.OpListIPs, emulator.OpBookIP, emulator.OpUpdateIP, emulator.OpGetIP, emulator.OpReleaseIP}

// allocEnv is an emulator with two Private Networks and a pool file over
// them: "auto" lets IPAM choose, "ranged" picks from four addresses,
// "manual" serves explicit addresses only, "drained" is disabled and
// "payments" is restricted to one namespace.
func allocEnv(t *testing.T, r References) (*env, *Allocator) {
	t.Helper()
	e := newEnv(t, "dc=172.16.32.0/22", "wide=172.16.64.0/22", "edge=10.10.0.0/29", "pay=10.20.0.0/24")
	cfg := e.Config(t, poolFile(`
  - {name: auto, privateNetworkID: "{{wide}}"}
  - {name: ranged, privateNetworkID: "{{dc}}", ranges: ["172.16.35.200-172.16.35.203"]}
  - {name: manual, privateNetworkID: "{{dc}}", ranges: ["172.16.34.0/24"], autoAssign: false}
  - {name: drained, privateNetworkID: "{{dc}}", ranges: ["172.16.33.0/24"], disabled: true}
  - {name: small, privateNetworkID: "{{edge}}"}
  - {name: payments, privateNetworkID: "{{pay}}", namespaces: ["payments"]}
`))
	return e, newAllocator(Options{Cloud: e.Cloud, Config: cfg, References: r})
}

func pool(t *testing.T, a *Allocator, name string) *ipam.Pool {
	t.Helper()
	p, ok := a.Config().Pool(name)
	if !ok {
		t.Fatalf("no pool %q", name)
	}
	return p
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func mustIP(t *testing.T, e *env, id string) *scaleway.IP {
	t.Helper()
	ip, err := e.Cloud.GetIP(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// wantRefusal checks err is an *Error of reason (any reason when empty)
// whose message holds every fragment.
func wantRefusal(t *testing.T, err error, reason ipam.Reason, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", reason)
	}
	if reason != "" && ipam.ReasonOf(err) != reason {
		t.Fatalf("reason = %s, want %s (%v)", ipam.ReasonOf(err), reason, err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("message %q does not mention %q", err.Error(), f)
		}
	}
}
func TestReleaseBooked(t *testing.T) {
	e, a := allocEnv(t, nil)
	ctx := context.Background()
	r, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "ranged"), Service: svc("web", "api")})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, &ipam.Grant{ID: "byo", BringYourOwn: true}); err != nil {
		t.Fatal(err) // not ours to release: a no-op
	}
	if err := a.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Srv.IP(r.ID); ok {
		t.Fatal("still booked")
	}
}
