package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/ociimage"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
)

// cluster is the real apiserver of the suite; proxy is the egress proxy it
// sends webhook calls through (see proxy_test.go); binary is scw-lb-ipam.
var (
	cluster *rest.Config
	kube    client.Client
	proxy   *testenv.ConnectProxy
	binary  string
	env     *envtest.Environment
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, b := range []string{"kube-apiserver", "etcd", "helm"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			fmt.Fprintf(os.Stderr, "chart: bin/%s is missing: run `make tools` (make test does it)\n", b)
			return 1
		}
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

	// The apiserver reaches Services through the cluster network, which does
	// not exist here: an egress selector sends those connections to a local
	// CONNECT proxy that maps the webhook Service to the binary's port.
	if proxy, err = testenv.StartConnectProxy(filepath.Join(tmp, "egress.sock")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer proxy.Close()
	egress := filepath.Join(tmp, "egress.yaml")
	if err := os.WriteFile(egress, []byte(proxy.EgressSelectorConfig()), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	env = &envtest.Environment{
		BinaryAssetsDirectory:    filepath.Join(root, "bin"),
		ControlPlaneStartTimeout: testenv.ControlPlaneStartTimeout,
		ControlPlaneStopTimeout:  15 * time.Second,
		CRDInstallOptions:        envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true},
	}
	env.ControlPlane.GetAPIServer().Configure().Set("egress-selector-config-file", egress)
	// Room for BenchmarkWebhookRSS's 500 LoadBalancer Services.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	if os.Getenv("CHART_VERBOSE") != "" {
		env.ControlPlane.GetAPIServer().Out, env.ControlPlane.GetAPIServer().Err = os.Stderr, os.Stderr
	}
	if cluster, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "chart: starting kube-apiserver and etcd:", err)
		return 1
	}
	// Stop the control plane however the run ends: SIGTERM, then SIGKILL.
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chart: stopping the control plane:", err)
		}
	}()
	fixtures.StopOnInterrupt(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if kube, err = client.New(cluster, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = context.Background()
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
