package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/scw-lb-ipam/scw-lb-ipam/cmd/scw-lb-ipam/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// Credentials of the emulator.
const (
	AccessKey = "SCWABCDEFGHIJKLMNOPQ"
	SecretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"
)

// Options configures Start.
type Options struct {
	// Root is the repository; default the parent of the test's package's parent.
	Root string
	// PrivateNetworks are created in the emulator, as "name=cidr[,cidr]";
	// "nodes" is the cluster's.
	PrivateNetworks []string
	// PoolFile renders the pool file from the networks' IDs.
	PoolFile func(pns map[string]ipamtest.PrivateNetwork) string
	// Namespaces to create; true means opted in.
	Namespaces map[string]bool
	// HelmSets are --set values for rendering the webhook configuration.
	HelmSets []string
	// Args are extra flags of serve (sweeper knobs, ...).
	Args []string
	// Logs receives the webhook's and sweeper's logs; nil discards them.
	Logs io.Writer
	// APIServerFlags are extra kube-apiserver flags.
	APIServerFlags map[string]string
}

// Env is a running control plane with scw-lb-ipam.
type Env struct {
	Config  *rest.Config
	Kube    client.Client
	Emu     *ipamtest.Server
	PNs     map[string]ipamtest.PrivateNetwork
	Metrics *prometheus.Registry

	o       Options
	env     *envtest.Environment
	tmp     string
	serve   app.Options
	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
	proxy   *apiProxy
}

// Start brings everything up. Call Stop, also when a test fails.
func Start(o Options) (_ *Env, err error) {
	if o.Root == "" {
		o.Root, _ = filepath.Abs("../..")
	}
	bin := filepath.Join(o.Root, "bin")
	for _, b := range []string{"kube-apiserver", "etcd", "helm"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("bin/%s is missing: run `make tools` (make test does it)", b)
		}
	}
	e := &Env{o: o, PNs: map[string]ipamtest.PrivateNetwork{}}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	if e.tmp, err = os.MkdirTemp("", "scw-lb-ipam-testenv-"); err != nil {
		return nil, err
	}
	e.Emu = ipamtest.New(ipamtest.Options{SecretKey: SecretKey})
	if _, err := e.Emu.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	for _, spec := range o.PrivateNetworks {
		name, cidrs, _ := strings.Cut(spec, "=")
		pn, err := e.Emu.AddPrivateNetwork(name, strings.Split(cidrs, ",")...)
		if err != nil {
			return nil, err
		}
		e.PNs[name] = pn
	}
	hook, err := e.renderWebhookConfig()
	if err != nil {
		return nil, err
	}
	// envtest points the configuration at the in-process server and fills
	// in its caBundle; everything else is the chart's.
	e.env = &envtest.Environment{
		BinaryAssetsDirectory:   bin,
		ControlPlaneStopTimeout: 15 * time.Second,
		WebhookInstallOptions:   envtest.WebhookInstallOptions{Paths: []string{hook}},
	}
	for k, v := range o.APIServerFlags {
		e.env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if e.Kube, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	for name, optedIn := range o.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if optedIn {
			ns.Labels = map[string]string{webhook.LabelEnabled: "true"}
		}
		if err := e.Kube.Create(context.Background(), ns); err != nil {
			return nil, err
		}
	}
	pools := filepath.Join(e.tmp, "pools.yaml")
	if err := os.WriteFile(pools, []byte(o.PoolFile(e.PNs)), 0o600); err != nil {
		return nil, err
	}
	wio := e.env.WebhookInstallOptions
	args := append([]string{"--config", pools, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--leader-election-namespace", "default", "--excluded-namespaces", "kube-system,scw-lb-ipam",
		// envtest provides the serving certificate and the caBundle.
		"--tls-mode", "cert-manager"}, o.Args...)
	if e.serve, err = app.ParseFlags(args); err != nil {
		return nil, err
	}
	e.serve.CertDir, e.serve.WebhookHost, e.serve.WebhookPort = wio.LocalServingCertDir, wio.LocalServingHost, wio.LocalServingPort
	// The webhook process reaches the apiserver through a proxy that a
	// test can cut (CutAPIServer).
	apiURL, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, err
	}
	if e.proxy, err = newAPIProxy(apiURL.Host); err != nil {
		return nil, err
	}
	e.serve.RestConfig = rest.CopyConfig(e.Config)
	e.serve.RestConfig.Host = "https://" + e.proxy.addr()
	e.serve.ScalewayOptions = []scw.ClientOption{scw.WithAPIURL(e.Emu.URL()), scw.WithAuth(AccessKey, SecretKey), scw.WithDefaultProjectID(ipamtest.DefaultProjectID)}
	logs := o.Logs
	if logs == nil {
		logs = io.Discard
	}
	e.serve.Log = zap.New(zap.WriteTo(logs))
	if err := e.StartWebhook(); err != nil {
		return nil, err
	}
	return e, nil
}

// renderWebhookConfig renders the chart's MutatingWebhookConfiguration for a
// release named scw-lb-ipam in namespace scw-lb-ipam.
func (e *Env) renderWebhookConfig() (string, error) {
	chart := filepath.Join(e.o.Root, "charts", "scw-lb-ipam")
	args := []string{"template", "scw-lb-ipam", chart, "--namespace", "scw-lb-ipam",
		"--values", filepath.Join(chart, "ci", "self-managed-values.yaml"),
		"--show-only", "templates/mutatingwebhookconfiguration.yaml"}
	for _, s := range e.o.HelmSets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(filepath.Join(e.o.Root, "bin", "helm"), args...)
	home := filepath.Join(e.tmp, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template: %w", err)
	}
	path := filepath.Join(e.tmp, "webhook.yaml")
	return path, os.WriteFile(path, out, 0o600)
}

// StartWebhook runs app.Serve with fresh metrics and waits until it serves.
func (e *Env) StartWebhook() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Metrics = prometheus.NewRegistry()
	e.serve.Metrics = e.Metrics
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.stopped = cancel, make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(e.stopped)
		errc <- app.Serve(ctx, e.serve)
	}()
	addr := net.JoinHostPort(e.serve.WebhookHost, strconv.Itoa(e.serve.WebhookPort))
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("serve returned: %w", err)
		default:
		}
		d := &net.Dialer{Timeout: time.Second}
		if c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil { //nolint:gosec // liveness probe only
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook did not listen within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CutAPIServer cuts the webhook process off from the apiserver (its
// connections dropped, new ones refused) until the returned func is called;
// the apiserver still calls the webhook.
func (e *Env) CutAPIServer() (restore func()) {
	e.proxy.block()
	return e.proxy.unblock
}

// Serving reports whether app.Serve is still running (it has not returned).
func (e *Env) Serving() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.stopped:
		return false
	default:
		return e.cancel != nil
	}
}

// StopWebhook stops app.Serve and waits for it.
func (e *Env) StopWebhook() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil {
		return
	}
	e.cancel()
	select {
	case <-e.stopped:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "testenv: the webhook did not stop within 30s")
	}
	e.cancel = nil
}

// Stop stops everything: the webhook, then kube-apiserver and etcd (SIGTERM,
// then SIGKILL after the timeout), the emulator, and removes temp files.
func (e *Env) Stop() {
	e.StopWebhook()
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
		}
	}
	if e.proxy != nil {
		e.proxy.close()
	}
	if e.Emu != nil {
		_ = e.Emu.Close()
	}
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
}

// Counter sums a counter family over its labels (0 when absent).
func (e *Env) Counter(name string) float64 {
	families, _ := e.Metrics.Gather()
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// ScalewayOptions point a Scaleway client at the emulator, as the webhook's.
func (e *Env) ScalewayOptions() []scw.ClientOption { return e.serve.ScalewayOptions }

// PoolFile is the pool file the webhook runs with.
func (e *Env) PoolFile() string { return e.o.PoolFile(e.PNs) }

// Total sums a gauge family over its labels, -1 when absent.
func (e *Env) Total(name string) float64 {
	families, _ := e.Metrics.Gather()
	for _, f := range families {
		if f.GetName() == name {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += m.GetGauge().GetValue()
			}
			return total
		}
	}
	return -1
}

// Gauge reads a pool gauge, -1 when absent.
func (e *Env) Gauge(name, pool string) float64 {
	families, _ := e.Metrics.Gather()
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && l.GetValue() == pool {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// Warnings collects the apiserver's warnings (admission warnings among
// them) for a client: set it as rest.Config.WarningHandler.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// List returns the warnings so far.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// Client is a client of the apiserver that reports its warnings to w (nil:
// none) and is not throttled on the client side, for load.
func (e *Env) Client(w rest.WarningHandler) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	if w != nil {
		cfg.WarningHandler = w
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return client.New(cfg, client.Options{Scheme: e.Kube.Scheme()})
}
