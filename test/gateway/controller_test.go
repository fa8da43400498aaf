package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The controller's namespace (ENVOY_GATEWAY_NAMESPACE), its GatewayClass
// controller name and the label it puts on a Gateway's Service, naming the
// Gateway's namespace.
const (
	controllerNamespace = "envoy-gateway-system"
	// unlistedNamespace is a controller's namespace the pool file does not
	// name in gatewayControllers: its Services are judged by their own.
	unlistedNamespace = "gateways-unlisted"
	controllerName    = "gateway.envoyproxy.io/gatewayclass-controller"
	owningNamespace   = "gateway.envoyproxy.io/owning-gateway-namespace"
	owningName        = "gateway.envoyproxy.io/owning-gateway-name"
)

// Deploy modes of the controller (EnvoyGateway provider.kubernetes.deploy).
const (
	controllerMode = "ControllerNamespace"
	gatewayMode    = "GatewayNamespace"
)

// envoyConfig is the controller's EnvoyGateway file: the Kubernetes
// provider, no leader election (one replica, out of cluster), no topology
// injector (it would need a MutatingWebhookConfiguration and a webhook the
// apiserver cannot reach), and the deploy mode.
const envoyConfig = `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: EnvoyGateway
gateway:
  controllerName: %s
logging:
  level:
    default: info
provider:
  type: Kubernetes
  kubernetes:
    leaderElection:
      disable: true
    proxyTopologyInjector:
      disabled: true
    deploy:
      type: %s
`

// controller is a running envoy-gateway server.
type controller struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	logs bytes.Buffer
}

// Write collects the controller's output (it is the command's stdout and
// stderr) for the checks and a failure's message.
func (c *controller) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if verbose {
		os.Stderr.Write(p)
	}
	return c.logs.Write(p)
}

// Logs is what the controller printed so far.
func (c *controller) Logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.String()
}

// startController runs `envoy-gateway server` in mode with ns as its
// namespace (ENVOY_GATEWAY_NAMESPACE), in a private mount
// namespace where /certs holds the certificates certgen put in the
// controller's Secret, and the in-cluster service-account directory a token
// (GatewayNamespace mode builds an in-cluster client at start, to review the
// tokens of proxies; none runs here).
func (w *world) startController(mode, ns string) (*controller, error) {
	dir, err := os.MkdirTemp(w.dir, "controller-")
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "envoy-gateway.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, envoyConfig, controllerName, mode), 0o600); err != nil {
		return nil, err
	}
	certs, sa, root := filepath.Join(dir, "certs"), filepath.Join(dir, "serviceaccount"), filepath.Join(dir, "root")
	if err := w.writeCerts(ns, certs); err != nil {
		return nil, err
	}
	if err := w.writeServiceAccount(sa); err != nil {
		return nil, err
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		return nil, err
	}
	api, err := url.Parse(w.Config.Host)
	if err != nil {
		return nil, err
	}
	c := &controller{done: make(chan struct{})}
	c.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "sh", privateRoot, root, certs, sa,
		envoyGatewayBin, "server", "--config-path", config)
	c.cmd.Env = append(os.Environ(), "ENVOY_GATEWAY_NAMESPACE="+ns, "KUBECONFIG="+w.kubeconfig,
		"KUBERNETES_SERVICE_HOST="+api.Hostname(), "KUBERNETES_SERVICE_PORT="+api.Port())
	c.cmd.Stdout, c.cmd.Stderr = c, c
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting envoy-gateway server: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// stopGrace is how long the controller is given to stop on SIGTERM.
const stopGrace = 15 * time.Second

// Stop stops the controller's process group: SIGTERM, then SIGKILL after
// stopGrace.
func (c *controller) Stop() {
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.done
	}
}

// Exited reports, with its output, whether the controller is no longer
// running.
func (c *controller) Exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("envoy-gateway server exited (%v):\n%s", c.cmd.ProcessState, c.Logs())
	default:
		return nil
	}
}

// certgen runs `envoy-gateway certgen`, which creates the controller's
// Secrets (its CA, the xDS server's and the proxies' certificates) in
// ENVOY_GATEWAY_NAMESPACE, ns, through KUBECONFIG.
func (w *world) certgen(ns string) error {
	cmd := exec.Command(envoyGatewayBin, "certgen", "--disable-topology-injector")
	cmd.Env = append(os.Environ(), "ENVOY_GATEWAY_NAMESPACE="+ns, "KUBECONFIG="+w.kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("envoy-gateway certgen: %w\n%s", err, out)
	}
	return nil
}

// writeCerts writes into dir the files of the Secret "envoy-gateway" in
// ns, which a cluster mounts on the controller's /certs.
func (w *world) writeCerts(ns, dir string) error {
	s := &corev1.Secret{}
	if err := w.Kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "envoy-gateway"}, s); err != nil {
		return fmt.Errorf("the Secret certgen creates: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(s.Data[f]) == 0 {
			return fmt.Errorf("secret %s/envoy-gateway has no %s", ns, f)
		}
		if err := os.WriteFile(filepath.Join(dir, f), s.Data[f], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeServiceAccount writes the in-cluster client's files: the
// apiserver's CA and a token that reviews nothing (no proxy connects).
func (w *world) writeServiceAccount(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if len(w.Config.CAData) == 0 {
		return errors.New("the control plane's config has no CA")
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), w.Config.CAData, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "token"), []byte("no-proxy-connects"), 0o600)
}

// contains reports whether the controller printed s.
func (c *controller) contains(s string) bool { return strings.Contains(c.Logs(), s) }

// line is the first line of the controller's output holding s.
func (c *controller) line(s string) string {
	for l := range strings.Lines(c.Logs()) {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
