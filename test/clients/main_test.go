package clients

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// The pool file's cluster and namespaces, and the sweeper's knobs: seconds,
// so that a stray booking is released within a scenario. The retention is
// long enough that no re-create here outlives it.
const (
	clusterName    = "clients"
	namespace      = "apps"
	webhookTimeout = 2 * time.Second
	retention      = 2 * time.Minute
	pendingGrace   = 6 * time.Second
)

var (
	root       = mustAbs("../..")
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	helmBin    = filepath.Join(root, "bin", "helm")
	chartDir   = mustAbs("testdata/chart")
)

// s is the control plane the kubectl and Helm scenarios share, each on a
// Service of its own; the late-deletion scenario starts its own (its
// emulator deletes Load Balancers late).
var s *controlPlane

// results are the scenarios' summary lines, printed once the package ends.
var results struct {
	sync.Mutex
	lines []string
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// test/testenv checks its own binaries; kubectl is this suite's.
	if _, err := os.Stat(kubectlBin); err != nil {
		fmt.Fprintln(os.Stderr, "clients: bin/kubectl is missing: run `make tools` (make test does it)")
		return 1
	}
	var err error
	if s, err = start(0); err != nil {
		fmt.Fprintln(os.Stderr, "clients:", err)
		return 1
	}
	defer func() {
		s.Stop()
		summary()
	}()
	// A Ctrl-C or SIGTERM still stops the control plane.
	fixtures.StopOnInterrupt(s.Stop)
	return m.Run()
}

// controlPlane is an Env with what the command-line clients need: an admin
// kubeconfig and a directory for their homes and manifests.
type controlPlane struct {
	*testenv.Env
	kubeconfig string
	dir        string
	// recreate bounds the wait for a re-created Service's Load Balancer
	// to be attached to its old address.
	recreate time.Duration
}

// start brings up a control plane whose emulator deletes Load Balancers
// lbDeleteDelay after DeleteLB (testenv's default with 0).
func start(lbDeleteDelay time.Duration) (*controlPlane, error) {
	env, err := testenv.Start(testenv.Options{
		Root:            root,
		PrivateNetworks: []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/24"},
		PoolFile: fmt.Sprintf(`clusterName: %s
region: fr-par
clusterPrivateNetworkID: {{nodes}}
pools:
  - {name: dc-link, privateNetworkID: {{dc}}, ranges: ["172.16.35.1-172.16.35.120"], retention: %s}
  - {name: general, privateNetworkID: {{edge}}, retention: %s}
`, clusterName, retention, retention),
		Namespaces: map[string]bool{namespace: true},
		Args: []string{"--sweep-interval", "1s", "--webhook-timeout", webhookTimeout.String(), "--pending-grace", pendingGrace.String(),
			"--max-releases-per-cycle", "100"},
		LBDeleteDelay: lbDeleteDelay,
	})
	if err != nil {
		return nil, err
	}
	if lbDeleteDelay == 0 {
		lbDeleteDelay = testenv.DefaultLBDeleteDelay
	}
	cp := &controlPlane{Env: env, recreate: attachBound(lbDeleteDelay)}
	if cp.dir, err = os.MkdirTemp("", "scw-lb-ipam-clients-"); err != nil {
		env.Stop()
		return nil, err
	}
	if cp.kubeconfig, err = cp.writeKubeconfig(); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

// attachBound bounds the wait for a re-created Service's new Load Balancer
// to get the old address: the old Load Balancer lets go of it delay after
// its deletion, and the CCM retries the failed attach with the
// service controller's backoff (5 s, then doubling), so the retry that
// succeeds is the first one after delay; the rest is room for a loaded
// machine.
func attachBound(delay time.Duration) time.Duration {
	retry, wait := time.Duration(0), 5*time.Second
	for retry < delay {
		retry, wait = retry+wait, 2*wait
	}
	return retry + 45*time.Second
}

// Stop stops the control plane and removes the clients' files.
func (cp *controlPlane) Stop() {
	cp.Env.Stop()
	_ = os.RemoveAll(cp.dir)
}

// writeKubeconfig writes the Env's admin credentials for kubectl and helm.
func (cp *controlPlane) writeKubeconfig() (string, error) {
	c := cp.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: namespace}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(cp.dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// kubectl runs bin/kubectl on the control plane; its discovery cache stays
// in the control plane's directory.
func (cp *controlPlane) kubectl(args ...string) (string, error) {
	return cp.command(kubectlBin, append([]string{"--kubeconfig", cp.kubeconfig, "--cache-dir", filepath.Join(cp.dir, "kube-cache")}, args...), nil)
}

// helm runs bin/helm on the control plane with a private home, so nothing
// of the machine's helm configuration leaks in.
func (cp *controlPlane) helm(args ...string) (string, error) {
	cmd := testenv.HelmCommand(context.Background(), helmBin, filepath.Join(cp.dir, "helm"), append(args, "--kubeconfig", cp.kubeconfig, "--namespace", namespace)...)
	return combined(cmd)
}

func (cp *controlPlane) command(bin string, args, env []string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	return combined(cmd)
}

// combined runs cmd and returns its combined output.
func combined(cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// scenario runs one scenario and records its summary line.
func scenario(t *testing.T, f func(t *testing.T)) {
	start := time.Now()
	defer func() {
		result := "PASS"
		if t.Failed() {
			result = "FAIL"
		}
		results.Lock()
		results.lines = append(results.lines, fmt.Sprintf("%-4s %-52s %6.1fs", result, t.Name(), time.Since(start).Seconds()))
		results.Unlock()
	}()
	f(t)
}

func summary() {
	results.Lock()
	defer results.Unlock()
	if len(results.lines) == 0 {
		return
	}
	fmt.Println("clients scenarios (real kubectl and helm, real kube-apiserver and etcd, the Scaleway CCM, Scaleway emulator):")
	for _, r := range results.lines {
		fmt.Println("  " + r)
	}
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}
