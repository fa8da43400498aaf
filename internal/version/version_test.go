package version

import (
	"strings"
	"testing"
)

func TestUnstamped(t *testing.T) {
	// A test binary is not stamped and has no main module version.
	if got := Version(); got != "dev" {
		t.Errorf("Version() = %q, want dev", got)
	}
	if got := String(); !strings.HasPrefix(got, "dev") || !strings.Contains(got, "go1.") {
		t.Errorf("String() = %q, want dev … go1.x", got)
	}
}

func TestStamped(t *testing.T) {
	// What -X does at link time, done by hand for this test only.
	version, revision = "1.2.3", "abc123"
	t.Cleanup(func() { version, revision = "", "" })
	if got := String(); !strings.HasPrefix(got, "1.2.3 (revision abc123) go1.") {
		t.Errorf("String() = %q", got)
	}
}
