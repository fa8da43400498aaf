package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// The namespaces: apps and shop hold Gateways the pool allows, outside one
// it does not; all are opted in, as are the controllers', where their
// Services live in the default mode. The pool allows neither controller's
// namespace: a Gateway's Service there gets the pool only as its
// Gateway's, in the namespace gatewayControllers names.
const (
	clusterName = "gateway"
	apps        = "apps"
	shop        = "shop"
	outside     = "outside"
	pool        = "dc-link"
	retention   = 3 * time.Minute
)

var (
	root            = repository()
	envoyGatewayBin = filepath.Join(root, "bin", "envoy-gateway")
	crdDir          = filepath.Join(root, "bin", "envoy-gateway-crds")
	privateRoot     = filepath.Join(root, "test", "gateway", "testdata", "private-root.sh")
	verbose         = testenv.Verbose()
)

// w is the world every scenario shares.
var w *world

// world is an Env with the Gateway API and Envoy Gateway CRDs, the
// controller's Secrets, and an admin kubeconfig for the controller.
type world struct {
	*testenv.Env
	dir        string
	kubeconfig string
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, p := range []string{envoyGatewayBin, crdDir} {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(os.Stderr, "gateway: %s is missing: run `make tools` (make test does it)\n", p)
			return 1
		}
	}
	if ok, err := localrun.Root("gateway", "the controller runs in a private mount namespace: unshare, mount, chroot"); !ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			return 1
		}
		return 0
	}
	var err error
	if w, err = start(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		return 1
	}
	defer w.Stop()
	fixtures.StopOnInterrupt(w.Stop)
	return m.Run()
}

// poolFile names Envoy Gateway's namespace and label in gatewayControllers;
// the pool allows apps and shop only.
const poolFile = `clusterName: %s
region: fr-par
clusterPrivateNetworkID: {{nodes}}
gatewayControllers:
  - {namespace: %s, gatewayNamespaceLabel: %s}
pools:
  - {name: %s, privateNetworkID: {{dc}}, ranges: ["172.16.35.1-172.16.35.120"], retention: %s, namespaces: [%s, %s]}
`

func start() (_ *world, err error) {
	env, err := testenv.Start(testenv.Options{
		Root:            root,
		PrivateNetworks: []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22"},
		PoolFile:        fmt.Sprintf(poolFile, clusterName, controllerNamespace, owningNamespace, pool, retention, apps, shop),
		Namespaces:      map[string]bool{controllerNamespace: true, unlistedNamespace: true, apps: true, shop: true, outside: true},
		Args:            []string{"--sweep-interval", "1s", "--webhook-timeout", "2s", "--pending-grace", "6s"},
	})
	if err != nil {
		return nil, err
	}
	w := &world{Env: env}
	defer func() {
		if err != nil {
			w.Stop()
		}
	}()
	if w.dir, err = os.MkdirTemp("", "scw-lb-ipam-gateway-"); err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(w.Config, envtest.CRDInstallOptions{Paths: []string{crdDir}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing the Gateway API and Envoy Gateway CRDs: %w", err)
	}
	kc, err := w.Kubeconfig("envoy-gateway", "system:masters")
	if err != nil {
		return nil, err
	}
	w.kubeconfig = filepath.Join(w.dir, "kubeconfig")
	if err := os.WriteFile(w.kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	for _, ns := range []string{controllerNamespace, unlistedNamespace} {
		if err := w.certgen(ns); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Stop stops the control plane and removes the suite's files.
func (w *world) Stop() {
	w.Env.Stop()
	if w.dir != "" {
		_ = os.RemoveAll(w.dir)
	}
}

// repository is the repository's root, the package's grandparent (go test
// runs in the package's directory).
func repository() string {
	r, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return r
}

// ctx is the scenarios' context: none of their calls is cancelled.
var ctx = context.Background()
