package localrun

import (
	"fmt"
	"os"
)

// RequireRootEnv names the variable that, set to 1, makes a missing root
// an error instead of a skip: CI sets it, where root is at hand and a
// skipped suite would be a check that silently did not run.
const RequireRootEnv = "SCW_LB_IPAM_REQUIRE_ROOT"

// Root reports whether a suite that needs root may run. Without root it
// says so on stderr, with why and how to run it, and the suite skips
// (exit 0): a contributor without sudo still runs every other test.
// With RequireRootEnv=1 the absence of root is an error.
func Root(suite, why string) (bool, error) {
	if os.Geteuid() == 0 {
		return true, nil
	}
	if os.Getenv(RequireRootEnv) == "1" {
		return false, fmt.Errorf("%s needs root (%s) and %s=1 says it must run: run make test as root (sudo)", suite, why, RequireRootEnv)
	}
	fmt.Fprintf(os.Stderr, "%s: SKIPPED: needs root (%s); run it as root (sudo make test) to include it\n", suite, why)
	return false, nil
}
