package integration

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// Retention and grace are seconds here so the sweeper's work fits a test:
// the webhook timeout is 2 s, so the reuse safety margin is 4 s, and a
// retained IP can be taken back during the first 4 s of its 8 s retention.
const (
	webhookTimeout = 2 * time.Second
	retention      = 8 * time.Second
	pendingGrace   = 6 * time.Second
	// The sweeper's lease: a 15 s outage outlasts the renew deadline.
	leaseDuration = 8 * time.Second
)

// serveArgs are the replicas' flags besides the testenv's.
var serveArgs = []string{"--sweep-interval", "1s", "--webhook-timeout", webhookTimeout.String(), "--pending-grace", pendingGrace.String(),
	"--max-releases-per-cycle", "100", "--leader-elect-lease-duration", leaseDuration.String(), "--leader-elect-renew-deadline", "5s",
	"--leader-elect-retry-period", "1s", "--convergence-grace", convergenceGrace.String()}

// s is the control plane, emulator and webhook the scenarios share; they run
// one after the other.
var s *suite

type suite struct {
	*testenv.Env
	mu      sync.Mutex
	results []string
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	env, err := testenv.Start(testenv.Options{
		PrivateNetworks: []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/24"},
		PoolFile: fmt.Sprintf(`clusterName: it
region: fr-par
clusterPrivateNetworkID: {{nodes}}
pools:
  - {name: dc-link, privateNetworkID: {{dc}}, ranges: ["172.16.35.1-172.16.35.120"], retention: %s}
  - {name: general, privateNetworkID: {{edge}}, retention: %s}
`, retention, retention),
		Namespaces:   map[string]bool{"payments": true, "web": true, "plain": false, "scw-lb-ipam": true},
		Args:         serveArgs,
		RotatableKey: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	s = &suite{Env: env}
	defer func() {
		env.Stop()
		s.summary()
	}()
	// A Ctrl-C or SIGTERM still stops the control plane.
	fixtures.StopOnInterrupt(env.Stop)
	return m.Run()
}

// record keeps one scenario's line for the summary printed at the end.
func (s *suite) record(t *testing.T, calls map[emulator.Op]int) {
	ops := make([]string, 0, len(calls))
	total := 0
	for op, n := range calls {
		if n > 0 {
			ops = append(ops, fmt.Sprintf("%s=%d", op, n))
			total += n
		}
	}
	sort.Strings(ops)
	result := "PASS"
	if t.Failed() {
		result = "FAIL"
	}
	s.mu.Lock()
	s.results = append(s.results, fmt.Sprintf("%-4s %-52s Scaleway calls: %3d  %s", result, t.Name(), total, strings.Join(ops, " ")))
	s.mu.Unlock()
}

func (s *suite) summary() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return
	}
	fmt.Println("integration scenarios (real kube-apiserver and etcd, Scaleway emulator):")
	for _, r := range s.results {
		fmt.Println("  " + r)
	}
}
