package localrun

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

const rootChildEnv = "LOCALRUN_ROOT_CHILD"

// TestRootWithoutRoot runs Root in a child process as an unprivileged
// user: it skips and says why, unless RequireRootEnv makes it an error.
func TestRootWithoutRoot(t *testing.T) {
	if os.Getenv(rootChildEnv) == "1" {
		ok, err := Root("suite", "it mounts")
		if ok {
			os.Exit(3)
		}
		if err != nil {
			os.Stderr.WriteString("error: " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		ok, err := Root("suite", "it mounts")
		if ok || (err == nil) == (os.Getenv(RequireRootEnv) == "1") {
			t.Fatalf("Root without root = %v, %v", ok, err)
		}
		return
	}
	// The test binary's directory is the build's own (0700): the child
	// runs it through the descriptor it inherits, not by its path.
	bin, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, tc := range []struct {
		require string
		code    int
		says    string
	}{
		{"", 0, "suite: SKIPPED: needs root (it mounts); run it as root (sudo make test)"},
		{"1", 2, "error: suite needs root (it mounts) and " + RequireRootEnv + "=1 says it must run"},
	} {
		cmd := exec.Command("/proc/self/fd/3", "-test.run=^TestRootWithoutRoot$")
		cmd.ExtraFiles = []*os.File{bin}
		cmd.Env = append(os.Environ(), rootChildEnv+"=1", RequireRootEnv+"="+tc.require)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("running the child as nobody: %v", err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.says) {
			t.Errorf("%s=%q: exit %d, output %q; want exit %d saying %q", RequireRootEnv, tc.require, code, out, tc.code, tc.says)
		}
	}
}
