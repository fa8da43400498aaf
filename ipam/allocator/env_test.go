package allocator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// env is a world of the allocator's tests: an emulator with the nodes'
// Private Network and the test's, and a Cloud talking to it through the
// real SDK; each test parses its own pool file (Config).
type env struct{ *fixtures.World }

// newEnv starts an emulator with the named Private Networks ("name=cidr").
func newEnv(t testing.TB, pns ...string) *env {
	t.Helper()
	return &env{fixtures.NewWorld(t, fixtures.WorldOptions{
		Emulator: emulator.Options{ProjectID: fixtures.Project, SecretKey: emulator.TestSecretKey},
		PNs:      append([]string{"nodes=172.16.0.0/22"}, pns...),
		// Five steps, as in production, over milliseconds.
		Backoff:  wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5, Cap: 100 * time.Millisecond},
		PageSize: 50,
	})}
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

// newAllocator is New for the tests, which name no Service cache or claim
// store unless they test one: the no-op ones stand in, said here once.
func newAllocator(o Options) *Allocator {
	if o.References == nil {
		o.References = NoReferences{}
	}
	if o.Claims == nil {
		o.Claims = NoClaims{}
	}
	a, err := New(o)
	if err != nil {
		panic(err)
	}
	return a
}

func TestNewRefusesMissingReferencesAndClaims(t *testing.T) {
	for name, o := range map[string]Options{
		"no References": {Claims: NoClaims{}},
		"no Claims":     {References: NoReferences{}},
	} {
		a, err := New(o)
		if err == nil || a != nil {
			t.Errorf("%s: New = %v, %v; want it refused", name, a, err)
			continue
		}
		if want := strings.TrimPrefix(name, "no "); !strings.Contains(err.Error(), "Options."+want+" is nil") {
			t.Errorf("%s: error %q does not name Options.%s", name, err, want)
		}
	}
}
