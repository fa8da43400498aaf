package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controlPlaneStartTimeout bounds each try to start kube-apiserver and etcd.
// envtest's 20 s default is too short on a 2-core machine under load (CI's
// cold run compiles beside the suites), where a start takes up to a minute.
const controlPlaneStartTimeout = 2 * time.Minute

// controlPlaneStopTimeout is how long kube-apiserver and etcd get after
// SIGTERM before envtest sends SIGKILL.
const controlPlaneStopTimeout = 15 * time.Second

// RequireTools fails when bin lacks a binary that a control plane with the
// chart needs, telling the user to run remedy (e.g. "`make tools` (make
// test does it)").
func RequireTools(bin, remedy string) error {
	for _, b := range []string{"kube-apiserver", "etcd", "helm"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("bin/%s is missing: run %s", b, remedy)
		}
	}
	return nil
}

// ControlPlaneOptions configures StartControlPlane.
type ControlPlaneOptions struct {
	// Bin holds kube-apiserver and etcd (see RequireTools).
	Bin string
	// Dir receives the egress proxy's socket and configuration; the
	// caller removes it after Stop.
	Dir string
	// APIServerFlags are extra kube-apiserver flags.
	APIServerFlags map[string]string
	// CRDs is a directory of CustomResourceDefinitions to install before
	// Start returns; "" installs none.
	CRDs string
	// Verbose sends kube-apiserver's output to stderr.
	Verbose bool
}

// ControlPlane is a running kube-apiserver and etcd whose webhook calls go
// through Egress, as they would through the cluster network to a pod.
type ControlPlane struct {
	// Config is an admin's: the client below and the suites use it.
	Config *rest.Config
	// Kube is a client of Config with client-go's scheme.
	Kube client.Client
	// Egress takes the apiserver's "cluster" connections: Route maps a
	// Service's ClusterIP to what serves it here.
	Egress *ConnectProxy

	env *envtest.Environment
}

// StartControlPlane starts the egress proxy, then kube-apiserver and etcd
// (and the CRDs). On an error, what it started is stopped.
func StartControlPlane(o ControlPlaneOptions) (_ *ControlPlane, err error) {
	cp := &ControlPlane{}
	// The apiserver reaches Services through the cluster network, which
	// does not exist here: the egress selector sends those connections to
	// a CONNECT proxy that maps a Service to local addresses.
	if cp.Egress, err = StartConnectProxy(filepath.Join(o.Dir, "egress.sock")); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()
	egress := filepath.Join(o.Dir, "egress.yaml")
	if err := os.WriteFile(egress, []byte(cp.Egress.EgressSelectorConfig()), 0o600); err != nil {
		return nil, err
	}
	// Set before Start: a start that fails half-way still stops what it ran.
	cp.env = &envtest.Environment{BinaryAssetsDirectory: o.Bin, ControlPlaneStartTimeout: controlPlaneStartTimeout, ControlPlaneStopTimeout: controlPlaneStopTimeout}
	if o.CRDs != "" {
		cp.env.CRDInstallOptions = envtest.CRDInstallOptions{Paths: []string{o.CRDs}, ErrorIfPathMissing: true}
	}
	apiserver := cp.env.ControlPlane.GetAPIServer()
	apiserver.Configure().Set("egress-selector-config-file", egress)
	for k, v := range o.APIServerFlags {
		apiserver.Configure().Set(k, v)
	}
	if o.Verbose {
		apiserver.Out, apiserver.Err = os.Stderr, os.Stderr
	}
	if cp.Config, err = cp.env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if cp.Kube, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	return cp, nil
}

// Kubeconfig is a kubeconfig for a new user of the control plane in
// groups, e.g. "system:masters" for kubectl as an admin.
func (cp *ControlPlane) Kubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := cp.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// UserConfig is the client config of a new user of the control plane in
// groups.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	u, err := cp.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// Stop stops kube-apiserver and etcd (SIGTERM, then SIGKILL after
// controlPlaneStopTimeout), then the egress proxy.
func (cp *ControlPlane) Stop() error {
	if cp == nil {
		return nil
	}
	var err error
	if cp.env != nil {
		err = cp.env.Stop()
	}
	if cp.Egress != nil {
		cp.Egress.Close()
	}
	return err
}
