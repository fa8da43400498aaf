package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/ociimage"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// published is where .github/workflows/release.yml publishes: the image
// under ghcr.io/OWNER/scw-lb-ipam, the chart under oci://ghcr.io/OWNER/charts.
const (
	publishedHost  = "ghcr.io"
	publishedImage = "scw-lb-ipam/scw-lb-ipam"
	publishedChart = "scw-lb-ipam/charts"
)

// registry is CNCF Distribution's registry (bin/registry) on the node's
// loopback, holding what the release workflow publishes, where containerd
// pulls ghcr.io's images from (its hosts.toml) and helm pulls the chart.
type registry struct {
	addr string // 127.0.0.1:PORT
	dir  string
	log  string
	cmd  *exec.Cmd
}

const registryConfig = `version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`

// startRegistry starts the registry and stops it when the test ends.
func startRegistry(t *testing.T) *registry {
	t.Helper()
	port, err := localrun.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := &registry{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: t.TempDir()}
	config := filepath.Join(r.dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, registryConfig, filepath.Join(r.dir, "storage"), r.addr), 0o600); err != nil {
		t.Fatal(err)
	}
	r.log = filepath.Join(r.dir, "registry.log")
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	r.cmd = exec.Command(cluster.bin("registry"), "serve", config)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	if !localrun.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}) {
		b, _ := os.ReadFile(r.log)
		t.Fatalf("the registry on %s did not answer /v2/ within 30s; its log:\n%s", r.addr, b)
	}
	return r
}

// publish pushes the image make image built and the chart as the release
// workflow does (scw-image push's ociimage.Push and PinChart, helm package
// and helm push), and returns the version.
func (r *registry) publish(t *testing.T) string {
	t.Helper()
	ref, err := ociimage.Push(context.Background(), ociimage.PushOptions{
		Layout: filepath.Join(repoRoot, "bin", "image", "oci"), Repository: r.addr + "/" + publishedImage,
		Chart: chartDir(), Auth: authn.Anonymous,
	})
	if err != nil {
		t.Fatalf("pushing the image: %v", err)
	}
	if ref.DigestStr() != cluster.digest {
		t.Fatalf("pushed %s, want make image's index %s", ref, cluster.digest)
	}
	// The chart pinned to the image by digest, as scw-image push
	// -pin-chart writes it for the release.
	pinned := filepath.Join(t.TempDir(), "scw-lb-ipam")
	if err := ociimage.PinChart(chartDir(), pinned, ref.DigestStr()); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if o, err := helm(t, "package", pinned, "--destination", out); err != nil {
		t.Fatalf("helm package: %v\n%s", err, o)
	}
	tgz, _ := filepath.Glob(filepath.Join(out, "scw-lb-ipam-*.tgz"))
	if len(tgz) != 1 {
		t.Fatalf("helm package made %v", tgz)
	}
	if o, err := helm(t, "push", tgz[0], "oci://"+r.addr+"/"+publishedChart, "--plain-http"); err != nil {
		t.Fatalf("helm push: %v\n%s", err, o)
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(tgz[0]), "scw-lb-ipam-"), ".tgz")
}

// mirror makes the node's containerd pull ghcr.io's images from the
// registry, and removes the image the node imported at its start, so that
// the kubelet's pull must reach the registry. It puts the image back as
// the other tests run it, if the pull did not.
func (r *registry) mirror(t *testing.T) {
	t.Helper()
	dir := cluster.path("certs.d", publishedHost)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := fmt.Sprintf("server = \"https://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", publishedHost, r.addr)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := cluster.ctr("images", "list", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Fields(list) {
		if strings.HasPrefix(name, imageRepository) {
			if _, err := cluster.ctr("images", "rm", "--sync", name); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(cluster.path("certs.d"))
		if list, err := cluster.ctr("images", "list", "-q"); err == nil && !strings.Contains(list, cluster.imageRef) {
			if _, _, err := cluster.importLayout(filepath.Join(repoRoot, "bin", "image")); err != nil {
				t.Errorf("importing the image again: %v", err)
			}
		}
	})
}

// pulled reports whether the registry served the image's manifest, by
// its digest, to containerd's pull (its access log).
func (r *registry) pulled() bool {
	b, err := os.ReadFile(r.log)
	return err == nil && strings.Contains(string(b), "/v2/"+publishedImage+"/manifests/"+cluster.digest) && strings.Contains(string(b), "containerd")
}
