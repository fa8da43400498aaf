package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWorkflowRunsAsWritten: .github/workflows/ci.yml caches every tool the
// Makefile builds (a tool left out costs a hosted runner its build on every
// push), and runs make test as root with the suites that need it required,
// so that none of them skips there; release.yml runs it before it
// publishes.
func TestWorkflowRunsAsWritten(t *testing.T) {
	root := moduleRoot(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	workflow, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cached := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(bin/\S+)\s*$`).FindAllStringSubmatch(string(workflow), -1) {
		cached[m[1]] = true
	}
	tools := regexp.MustCompile(`(?m)^(bin/[a-z0-9-]+): FORCE$`).FindAllStringSubmatch(string(makefile), -1)
	if len(tools) < 10 {
		t.Fatalf("found %d tool rules in the Makefile: the pattern no longer reads it", len(tools))
	}
	for _, m := range tools {
		if !cached[m[1]] {
			t.Errorf("ci.yml does not cache %s, which the Makefile builds", m[1])
		}
	}
	for _, want := range []string{"sudo ", "SCW_LB_IPAM_REQUIRE_ROOT=1 make test", "workflow_call:"} {
		if !strings.Contains(string(workflow), want) {
			t.Errorf("ci.yml does not hold %q", want)
		}
	}
	// The release publishes what ci.yml tested, and tests nothing its own
	// way.
	release, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(release), "uses: ./.github/workflows/ci.yml") || regexp.MustCompile(`(?m)^\s*(- )?run:.*make test`).Match(release) {
		t.Error("release.yml does not run make test through ci.yml")
	}
}
