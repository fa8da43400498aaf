package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// --convergence-grace reaches the sweeper, defaults to the sweeper's
// default, and a grace of nothing is refused with what it is for.
func TestConvergenceGraceFlag(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "scw-lb-ipam")
	o, err := ParseFlags(nil)
	if err != nil || o.Sweep.ConvergenceGrace != sweeper.DefaultConvergenceGrace {
		t.Fatalf("default %s (%v), want %s", o.Sweep.ConvergenceGrace, err, sweeper.DefaultConvergenceGrace)
	}
	o, err = ParseFlags([]string{"--convergence-grace", "90s"})
	if err != nil {
		t.Fatal(err)
	}
	alloc := fixtures.Must(allocator.New(allocator.Options{Config: &ipam.Config{}, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
	if got := o.sweeperOptions(nil, alloc, nil, prometheus.NewRegistry(), logr.Discard()).ConvergenceGrace; got != 90*time.Second {
		t.Fatalf("the sweeper got a grace of %s, want 90s", got)
	}
	for _, bad := range []string{"0s", "-1m"} {
		_, err := ParseFlags([]string{"--convergence-grace", bad})
		if err == nil || !strings.Contains(err.Error(), "--convergence-grace") || !strings.Contains(err.Error(), "more than 0") {
			t.Errorf("--convergence-grace %s: %v", bad, err)
		}
	}
}

// TestKubeSystemAlwaysExcluded: kube-system and the release namespace are
// excluded whatever --excluded-namespaces says, as DESIGN.md and the
// install guide promise; the flag adds to them.
func TestKubeSystemAlwaysExcluded(t *testing.T) {
	for flag, want := range map[string][]string{
		"":                 {"kube-system", "scw-lb-ipam"},
		"kube-system":      {"kube-system", "scw-lb-ipam"},
		"legacy, , batch ": {"kube-system", "legacy", "batch", "scw-lb-ipam"},
	} {
		if got := excludedNamespaces(flag, "scw-lb-ipam"); !slices.Equal(got, want) {
			t.Errorf("--excluded-namespaces=%q: %v, want %v", flag, got, want)
		}
	}
}
