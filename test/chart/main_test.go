package chart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/ociimage"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// cluster is the real apiserver of the suite; proxy is the egress proxy it
// sends webhook calls through (the control plane's Egress); binary is
// scw-lb-ipam.
var (
	cluster *rest.Config
	kube    client.Client
	proxy   *testenv.ConnectProxy
	binary  string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if err := testenv.RequireTools(filepath.Join(root, "bin"), "`make tools` (make test does it)"); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		return 1
	}
	crds := filepath.Join(root, "bin", "crds")
	if _, err := os.Stat(crds); err != nil {
		fmt.Fprintln(os.Stderr, "chart: bin/crds is missing: run `make crds` (make test does it)")
		return 1
	}
	tmp, err := os.MkdirTemp("", "scw-lb-ipam-chart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)

	// What the chart's pods run: the binary of the image make image wrote,
	// for this machine's platform, not a go build of the tree.
	layoutDir := filepath.Join(root, "bin", "image", "oci")
	if _, err := os.Stat(layoutDir); err != nil {
		fmt.Fprintln(os.Stderr, "chart: bin/image/oci is missing: run `make image` (make test does it)")
		return 1
	}
	if binary, err = ociimage.ExtractBinary(layoutDir, tmp); err != nil {
		fmt.Fprintln(os.Stderr, "chart: taking scw-lb-ipam out of the image:", err)
		return 1
	}
	// It is the release build: stamped with the chart's appVersion.
	version, err := exec.Command(binary, "version").Output()
	if err != nil || !strings.HasPrefix(string(version), "scw-lb-ipam "+appVersion()+" ") {
		fmt.Fprintf(os.Stderr, "chart: the image's binary says %q (%v), want version %s\n", version, err, appVersion())
		return 1
	}

	// Webhook calls go through the control plane's egress proxy, which
	// maps the webhook Service to the binary's port.
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{
		Bin: filepath.Join(root, "bin"), Dir: tmp, CRDs: crds, Verbose: testenv.Verbose(),
		// Room for BenchmarkWebhookRSS's 500 LoadBalancer Services.
		APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/16"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		return 1
	}
	// Stop the control plane however the run ends: SIGTERM, then SIGKILL.
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chart: stopping the control plane:", err)
		}
	}()
	fixtures.StopOnInterrupt(func() { _ = cp.Stop() })
	cluster, kube, proxy = cp.Config, cp.Kube, cp.Egress
	return m.Run()
}

// appVersion is the chart's appVersion, the one place the version is set.
func appVersion() string {
	b, _ := os.ReadFile(filepath.Join(root, "charts", "scw-lb-ipam", "Chart.yaml"))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "appVersion:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}
