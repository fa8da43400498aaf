package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// cluster is the node the tests run on (node side only).
var cluster *node

// TestMain runs twice: on the host, where it makes the namespaces, runs
// itself again inside them and checks the host afterwards; and inside, where
// it brings the node up, runs the tests and tears the node down.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envDir); dir != "" {
		os.Exit(runNode(m, dir))
	}
	os.Exit(runHost())
}

func runNode(m *testing.M, dir string) int {
	// controller-runtime's clients log nothing the tests read; unset, its
	// logger prints a stack trace on first use.
	ctrllog.SetLogger(logr.Discard())
	if err := os.WriteFile(filepath.Join(dir, mntnsFile), fmt.Appendf(nil, "%d", nsInode("/proc/self/ns/mnt")), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	n, err := startNode(dir, os.Getenv(envCgroup))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the node:", err)
		return 1
	}
	fixtures.StopOnInterrupt(func() {
		fmt.Fprintln(os.Stderr, "e2e: interrupted: stopping the node")
		n.stop()
	})
	cluster = n
	code := m.Run()
	if code != 0 {
		n.dumpLogs()
	}
	n.stop()
	return code
}

// dumpLogs prints the end of each process's log, for a failed run.
func (n *node) dumpLogs() {
	for _, name := range n.order {
		fmt.Printf("--- the end of %s's log:\n%s\n", name, n.procs[name].tail(15))
	}
	if out, err := n.ctr("containers", "list"); err == nil {
		fmt.Printf("--- containerd's containers:\n%s\n", strings.TrimSpace(out))
	}
}
