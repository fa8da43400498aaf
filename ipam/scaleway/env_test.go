package scaleway

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// Credentials of the emulator; shaped like real ones, so the SDK accepts them.
const (
	testAccessKey = "SCWABCDEFGHIJKLMNOPQ"
	testSecretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"
	testProject   = "564aa517-68b0-4fd7-8c8c-d21c4bcdcbd5"
)

// clusterTag is a ledger tag as the allocator writes it.
const clusterTag = "scw-lb-ipam/cluster=test"

// env is one emulator, a Cloud talking to it through the real SDK, and its
// Private Networks by name.
type env struct {
	srv   *emulator.Server
	cloud Cloud
	pns   map[string]emulator.PrivateNetwork
}

// newEnv starts an emulator with the named Private Networks ("name=cidr").
func newEnv(t *testing.T, pns ...string) *env {
	t.Helper()
	srv := emulator.NewTestServer(t, emulator.Options{ProjectID: testProject, SecretKey: testSecretKey})
	nets, err := srv.AddPrivateNetworks(append([]string{"nodes=172.16.0.0/22"}, pns...)...)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, pns: nets}
	c, err := New(context.Background(), Options{
		Region:        "fr-par",
		ClientOptions: srv.ClientOptions(),
		// Short steps keep retry tests quick; the shape is the production one.
		Backoff:  wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5, Cap: 100 * time.Millisecond},
		PageSize: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.cloud = c
	return e
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
