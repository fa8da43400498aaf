package allocator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// Credentials of the emulator; shaped like real ones, so the SDK accepts them.
const (
	testAccessKey = "SCWABCDEFGHIJKLMNOPQ"
	testSecretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"
	testProject   = "564aa517-68b0-4fd7-8c8c-d21c4bcdcbd5"
)

// env is one emulator, a Cloud talking to it through the real SDK, and the
// Private Networks a test's pool file refers to.
type env struct {
	srv   *scalewaytest.Server
	cloud scaleway.Cloud
	pns   map[string]scalewaytest.PrivateNetwork
}

// newEnv starts an emulator with the named Private Networks ("name=cidr").
func newEnv(t testing.TB, pns ...string) *env {
	t.Helper()
	srv, nets := fixtures.Emulator(t, scalewaytest.Options{ProjectID: testProject, SecretKey: testSecretKey}, append([]string{"nodes=172.16.0.0/22"}, pns...)...)
	e := &env{srv: srv, pns: nets}
	e.cloud = e.newCloud(t)
	return e
}

func (e *env) newCloud(t testing.TB) scaleway.Cloud {
	t.Helper()
	return fixtures.Cloud(t, e.srv, scaleway.Options{
		// Short steps keep retry tests quick; the shape is the production one.
		Backoff:  wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5, Cap: 100 * time.Millisecond},
		PageSize: 50,
	})
}

// config parses and resolves a pool file whose PN IDs are written as {{name}}.
func (e *env) config(t testing.TB, file string) *ipam.Config {
	t.Helper()
	c, err := ipam.ParseConfig([]byte(localrun.PoolFile(file, e.pns)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(context.Background(), e.cloud); err != nil {
		t.Fatal(err)
	}
	return c
}

func poolFile(pools string) string {
	return "clusterName: test\nregion: fr-par\nclusterPrivateNetworkID: {{nodes}}\npools:\n" + pools
}

// refs is a fixed answer to "which live Service references this ID": the
// webhook feeds the allocator from its informer cache.
type refs map[string]types.NamespacedName

func (r refs) ReferencedBy(_ context.Context, id string) ([]types.NamespacedName, error) {
	if s, ok := r[id]; ok {
		return []types.NamespacedName{s}, nil
	}
	return nil, nil
}

func (r refs) Exists(_ context.Context, svc types.NamespacedName) (bool, error) {
	for _, s := range r {
		if s == svc {
			return true, nil
		}
	}
	return false, nil
}

// terminating adds Services that exist but are being deleted (the CCM's
// finalizer holds them): they reference nothing live.
type terminating struct {
	References
	names []types.NamespacedName
}

func (t terminating) Exists(ctx context.Context, svc types.NamespacedName) (bool, error) {
	if slices.Contains(t.names, svc) {
		return true, nil
	}
	return t.References.Exists(ctx, svc)
}

// beingDeleted makes the allocator's cache show svc Terminating.
func beingDeleted(a *Allocator, names ...types.NamespacedName) {
	a.refs = terminating{References: a.refs, names: names}
}

func svc(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// calls returns the emulator's call counts as "Op=n" for the operations
// that count in a test, for compact assertions.
func (e *env) calls(ops ...scalewaytest.Op) string {
	var parts []string
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s=%d", op, e.srv.Count(op)))
	}
	return strings.Join(parts, " ")
}
