package dns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// The pool file's cluster and the opted-in namespace; the pool's
// retention is long enough that no re-create here outlives it.
const (
	clusterName = "dns"
	namespace   = "apps"
	retention   = 2 * time.Minute
	// convergenceGrace: a reserved IP not applied is reported once it has
	// stayed so this long (5m by default).
	convergenceGrace = 3 * time.Second
)

// root is the repository, and namedBin and externalDNSBin what make tools
// put in its bin/; TestMain sets them.
var root, namedBin, externalDNSBin string

// live are the worlds running, which a Ctrl-C or SIGTERM stops.
var live struct {
	sync.Mutex
	worlds map[*world]bool
}

func TestMain(m *testing.M) {
	var err error
	if root, err = filepath.Abs("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "dns:", err)
		os.Exit(1)
	}
	namedBin, externalDNSBin = filepath.Join(root, "bin", "named"), filepath.Join(root, "bin", "external-dns")
	// test/testenv checks its own binaries; these are this suite's.
	for _, bin := range []string{namedBin, externalDNSBin} {
		if _, err := os.Stat(bin); err != nil {
			fmt.Fprintf(os.Stderr, "dns: %s is missing: run `make tools` (make test does it)\n", bin)
			os.Exit(1)
		}
	}
	live.worlds = map[*world]bool{}
	fixtures.StopOnInterrupt(func() {
		live.Lock()
		defer live.Unlock()
		for w := range live.worlds {
			w.stop()
		}
	})
	os.Exit(m.Run())
}

// poolFile has one pool, dc-link, on the "dc" network, which is not the
// nodes': its Load Balancers get a DHCP address on the nodes' network
// besides the reserved one. dnsTarget is the switch under test.
func poolFile(dnsTarget bool) string {
	return fmt.Sprintf(`clusterName: %s
region: fr-par
clusterPrivateNetworkID: {{nodes}}
dnsTarget: %t
pools:
  - {name: dc-link, privateNetworkID: {{dc}}, ranges: ["172.16.35.1-172.16.35.120"], retention: %s}
`, clusterName, dnsTarget, retention)
}

// world is a control plane (webhook replicas, CCM, emulator) with named
// and external-dns publishing its Services.
type world struct {
	*testenv.Env
	dir   string
	named *named
	// externalDNS are the external-dns instances running, the first
	// started with the world.
	externalDNS []*proc
	once        sync.Once
}

// startWorld brings up a world whose pool file says dnsTarget; the test's
// cleanup stops it.
func startWorld(t *testing.T, dnsTarget bool) *world {
	t.Helper()
	dir := t.TempDir()
	env, err := testenv.Start(testenv.Options{
		Root:            root,
		PrivateNetworks: []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22"},
		PoolFile:        poolFile(dnsTarget),
		Namespaces:      map[string]bool{namespace: true},
		Args: []string{"--sweep-interval", "1s", "--webhook-timeout", "2s", "--pending-grace", "6s",
			"--convergence-grace", convergenceGrace.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{Env: env, dir: dir}
	live.Lock()
	live.worlds[w] = true
	live.Unlock()
	t.Cleanup(func() {
		live.Lock()
		delete(live.worlds, w)
		live.Unlock()
		w.stop()
	})
	if w.named, err = startNamed(namedBin, dir); err != nil {
		t.Fatal(err)
	}
	if err := w.startExternalDNS("external-dns", api.prefix, clusterName); err != nil {
		t.Fatal(err)
	}
	return w
}

// stop stops external-dns, named, then the control plane, once.
func (w *world) stop() {
	w.once.Do(func() {
		for _, p := range w.externalDNS {
			p.stop()
		}
		if w.named != nil {
			w.named.stop()
		}
		w.Env.Stop()
	})
}

// logTails are the ends of external-dns's logs, for a failure message.
func (w *world) logTails() string {
	var b strings.Builder
	for _, p := range w.externalDNS {
		b.WriteString(p.logTail() + "\n")
	}
	return b.String()
}
