package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

const (
	accessKey = "SCWABCDEFGHIJKLMNOPQ"
	secretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"
	// Retention and grace are seconds here so the sweeper's work fits a test.
	retention    = 4 * time.Second
	pendingGrace = 3 * time.Second
)

// suite is the control plane, the emulator and the running webhook shared
// by the scenarios, which run one after the other.
type suite struct {
	env     *envtest.Environment
	cfg     *rest.Config
	kube    client.Client
	emu     *ipamtest.Server
	pns     map[string]ipamtest.PrivateNetwork
	opts    app.Options
	metrics *prometheus.Registry

	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
	results []string
}

var s *suite

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	bin, _ := filepath.Abs("../../bin")
	for _, b := range []string{"kube-apiserver", "etcd", "helm"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			fmt.Fprintf(os.Stderr, "integration: %s is missing in %s: run `make tools` (make test does it)\n", b, bin)
			return 1
		}
	}
	s = &suite{pns: map[string]ipamtest.PrivateNetwork{}}
	defer func() {
		// Always stop the control plane: SIGTERM, then SIGKILL after the timeout.
		s.stopWebhook()
		if err := s.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: stopping the control plane:", err)
		}
		if s.emu != nil {
			_ = s.emu.Close()
		}
		s.summary()
	}()
	// A Ctrl-C or SIGTERM still runs the deferred stop.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		s.stopWebhook()
		_ = s.env.Stop()
		os.Exit(130)
	}()

	s.emu = ipamtest.New(ipamtest.Options{SecretKey: secretKey})
	if _, err := s.emu.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, spec := range []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/24"} {
		name, cidr, _ := strings.Cut(spec, "=")
		pn, err := s.emu.AddPrivateNetwork(name, cidr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s.pns[name] = pn
	}

	hookConfig, err := renderWebhookConfig(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(filepath.Dir(hookConfig))
	// envtest points the configuration's clientConfig at the in-process
	// server and fills in its caBundle; everything else is the chart's.
	s.env = &envtest.Environment{
		BinaryAssetsDirectory:   bin,
		ControlPlaneStopTimeout: 15 * time.Second,
		WebhookInstallOptions:   envtest.WebhookInstallOptions{Paths: []string{hookConfig}},
	}
	cfg, err := s.env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: starting kube-apiserver and etcd:", err)
		return 1
	}
	s.cfg = cfg
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if s.kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, ns := range []struct {
		name  string
		label bool
	}{{"payments", true}, {"web", true}, {"plain", false}, {"scw-lb-ipam", true}} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name}}
		if ns.label {
			n.Labels = map[string]string{webhook.LabelEnabled: "true"}
		}
		if err := s.kube.Create(context.Background(), n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := s.startWebhook(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: starting the webhook:", err)
		return 1
	}
	return m.Run()
}

// renderWebhookConfig renders the chart's MutatingWebhookConfiguration for
// a release named scw-lb-ipam in namespace scw-lb-ipam.
func renderWebhookConfig(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "scw-lb-ipam-it-hook-")
	if err != nil {
		return "", err
	}
	chart, _ := filepath.Abs("../../charts/scw-lb-ipam")
	cmd := exec.Command(filepath.Join(bin, "helm"), "template", "scw-lb-ipam", chart, "--namespace", "scw-lb-ipam",
		"--values", filepath.Join(chart, "ci", "self-managed-values.yaml"),
		"--show-only", "templates/mutatingwebhookconfiguration.yaml")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template: %w", err)
	}
	path := filepath.Join(dir, "webhook.yaml")
	return path, os.WriteFile(path, out, 0o600)
}

// poolFile writes the suite's pool file.
func (s *suite) poolFile() (string, error) {
	content := fmt.Sprintf(`clusterName: it
region: fr-par
clusterPrivateNetworkID: %s
pools:
  - {name: dc-link, privateNetworkID: %s, ranges: ["172.16.35.1-172.16.35.120"], retention: %s}
  - {name: general, privateNetworkID: %s, retention: %s}
`, s.pns["nodes"].ID, s.pns["dc"].ID, retention, s.pns["edge"].ID, retention)
	dir, err := os.MkdirTemp("", "scw-lb-ipam-it-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "pools.yaml")
	return path, os.WriteFile(path, []byte(content), 0o600)
}

// startWebhook runs app.Serve in-process with the webhook server where
// envtest pointed the apiserver, and waits until it answers.
func (s *suite) startWebhook() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	wio := s.env.WebhookInstallOptions
	if s.opts.ConfigFile == "" {
		path, err := s.poolFile()
		if err != nil {
			return err
		}
		o, err := app.ParseFlags([]string{"--config", path, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--sweep-interval", "1s", "--pending-grace", pendingGrace.String(), "--max-releases-per-cycle", "100",
			"--leader-election-namespace", "default", "--excluded-namespaces", "kube-system,scw-lb-ipam",
			// envtest provides the serving certificate and the caBundle.
			"--tls-mode", "cert-manager"})
		if err != nil {
			return err
		}
		o.CertDir, o.WebhookHost, o.WebhookPort = wio.LocalServingCertDir, wio.LocalServingHost, wio.LocalServingPort
		o.RestConfig = s.cfg
		o.ScalewayOptions = []scw.ClientOption{scw.WithAPIURL(s.emu.URL()), scw.WithAuth(accessKey, secretKey), scw.WithDefaultProjectID(ipamtest.DefaultProjectID)}
		// IT_VERBOSE=1 shows the webhook's and sweeper's logs.
		o.Log = zap.New(zap.WriteTo(io.Discard))
		if os.Getenv("IT_VERBOSE") != "" {
			o.Log = zap.New(zap.UseDevMode(true))
		}
		s.opts = o
	}
	s.metrics = prometheus.NewRegistry()
	s.opts.Metrics = s.metrics
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.stopped = make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(s.stopped)
		errc <- app.Serve(ctx, s.opts)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("serve returned: %w", err)
		default:
		}
		if conn, err := (&tlsProbe{host: wio.LocalServingHost, port: wio.LocalServingPort}).dial(); err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook did not listen within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) stopWebhook() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	s.cancel()
	select {
	case <-s.stopped:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "integration: the webhook did not stop within 30s")
	}
	s.cancel = nil
}

// admissions reads scw_lb_ipam_admissions_total summed over labels.
func (s *suite) admissions() float64 {
	families, err := s.metrics.Gather()
	if err != nil {
		return -1
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "scw_lb_ipam_admissions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += counterValue(m)
		}
	}
	return total
}

// gauge reads one pool gauge, -1 when absent.
func (s *suite) gauge(name, pool string) float64 {
	families, err := s.metrics.Gather()
	if err != nil {
		return -1
	}
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

func counterValue(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// record keeps one scenario's line for the summary printed at the end.
func (s *suite) record(t *testing.T, calls map[ipamtest.Op]int) {
	ops := make([]string, 0, len(calls))
	total := 0
	for op, n := range calls {
		if n > 0 {
			ops = append(ops, fmt.Sprintf("%s=%d", op, n))
			total += n
		}
	}
	sort.Strings(ops)
	result := "PASS"
	if t.Failed() {
		result = "FAIL"
	}
	s.mu.Lock()
	s.results = append(s.results, fmt.Sprintf("%-4s %-52s Scaleway calls: %3d  %s", result, t.Name(), total, strings.Join(ops, " ")))
	s.mu.Unlock()
}

func (s *suite) summary() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return
	}
	fmt.Println("integration scenarios (real kube-apiserver and etcd, Scaleway emulator):")
	for _, r := range s.results {
		fmt.Println("  " + r)
	}
}
