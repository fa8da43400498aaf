package bench

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the sweeper's cycle when the test binary is started again
// as its child (see sweep_test.go): the cycle's peak RSS is then the
// sweeper's alone, without the emulator and the control plane the parent
// holds.
func TestMain(m *testing.M) {
	if os.Getenv(sweepChildEnv) != "" {
		if err := sweepChild(); err != nil {
			fmt.Fprintln(os.Stderr, "sweeper child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
