package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/scaleway/scaleway-sdk-go/scw"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/cloudcontroller"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
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
	// HelmSets are --set values for rendering the chart's webhook
	// configuration and Service.
	HelmSets []string
	// Args are extra flags of serve (sweeper knobs, ...).
	Args []string
	// Replicas of the webhook behind the chart's Service; default 2, as the
	// chart installs.
	Replicas int
	// Logs receives the webhook's and sweeper's logs; nil discards them.
	Logs io.Writer
	// APIServerFlags are extra kube-apiserver flags.
	APIServerFlags map[string]string
	// CCMDelay is the CCM stand-in's delay before each step (see
	// cloudcontroller.Options.Delay); default 300 ms.
	CCMDelay time.Duration
	// NoCCM leaves the CCM stand-in out (benchmarks of the admission path
	// alone).
	NoCCM bool
}

// The release the chart is rendered as: its webhook configuration, Service
// and TLS Secret names.
const (
	ReleaseNamespace = "scw-lb-ipam"
	release          = "scw-lb-ipam"
)

// Env is a running control plane with scw-lb-ipam replicas.
type Env struct {
	Config   *rest.Config
	Kube     client.Client
	Emu      *ipamtest.Server
	PNs      map[string]ipamtest.PrivateNetwork
	Replicas []*Replica

	o       Options
	env     *envtest.Environment
	tmp     string
	egress  *ConnectProxy
	service string // the webhook Service's ClusterIP:443
	stopCCM func()
}

// Replica is one webhook process (app.Serve in process) with its own
// caches, metrics, serving port and connection to the apiserver.
type Replica struct {
	Name    string
	Metrics *prometheus.Registry

	env     *Env
	serve   app.Options
	addr    string
	probe   string // its /readyz
	proxy   *apiProxy
	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
}

// Start brings everything up: the emulator, kube-apiserver and etcd with an
// egress proxy in front of the cluster network, the chart's Service and
// MutatingWebhookConfiguration, and the replicas in self-managed TLS mode
// (they keep the CA Secret and the caBundle, as in a cluster). Call Stop,
// also when a test fails.
func Start(o Options) (_ *Env, err error) {
	if o.Root == "" {
		o.Root, _ = filepath.Abs("../..")
	}
	if o.Replicas == 0 {
		o.Replicas = 2
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
	if o.CCMDelay == 0 {
		o.CCMDelay = 300 * time.Millisecond
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
	// The apiserver calls the webhook through its Service: the egress
	// selector sends "cluster" connections to a CONNECT proxy that maps the
	// ClusterIP to the replicas.
	if e.egress, err = StartConnectProxy(filepath.Join(e.tmp, "egress.sock")); err != nil {
		return nil, err
	}
	egress := filepath.Join(e.tmp, "egress.yaml")
	if err := os.WriteFile(egress, []byte(e.egress.EgressSelectorConfig()), 0o600); err != nil {
		return nil, err
	}
	e.env = &envtest.Environment{BinaryAssetsDirectory: bin, ControlPlaneStopTimeout: 15 * time.Second}
	e.env.ControlPlane.GetAPIServer().Configure().Set("egress-selector-config-file", egress)
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
	ctx := context.Background()
	if err := e.Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReleaseNamespace}}); err != nil {
		return nil, err
	}
	for name, optedIn := range o.Namespaces {
		if name == ReleaseNamespace {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if optedIn {
			ns.Labels = map[string]string{ccm.LabelEnabled: "true"}
		}
		if err := e.Kube.Create(ctx, ns); err != nil {
			return nil, err
		}
	}
	if err := e.applyChart(ctx); err != nil {
		return nil, err
	}
	pools := filepath.Join(e.tmp, "pools.yaml")
	if err := os.WriteFile(pools, []byte(o.PoolFile(e.PNs)), 0o600); err != nil {
		return nil, err
	}
	logs := o.Logs
	if logs == nil {
		logs = io.Discard
	}
	apiURL, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, err
	}
	for i := range o.Replicas {
		r := &Replica{Name: fmt.Sprintf("replica-%d", i), env: e}
		probe, err := freePort()
		if err != nil {
			return nil, err
		}
		r.probe = fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)
		args := append([]string{"--config", pools, "--metrics-bind-address", "0", "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probe),
			"--leader-election-namespace", ReleaseNamespace, "--excluded-namespaces", "kube-system",
			"--webhook-host", "127.0.0.1", "--webhook-port", "9443", "--tls-mode", "cert-manager"}, o.Args...)
		if r.serve, err = app.ParseFlags(args); err != nil {
			return nil, err
		}
		// Self-managed TLS, as the chart runs it: a CA and serving
		// certificate in a Secret the replicas share, the caBundle kept.
		r.serve.TLS.SelfManaged, r.serve.TLS.Namespace = true, ReleaseNamespace
		r.serve.TLS.SecretName, r.serve.TLS.ServiceName, r.serve.TLS.WebhookConfig = release+"-tls", release, release
		r.serve.Excluded = append(r.serve.Excluded, ReleaseNamespace)
		r.serve.CertDir = filepath.Join(e.tmp, r.Name, "certs")
		if r.serve.WebhookPort, err = freePort(); err != nil {
			return nil, err
		}
		r.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.serve.WebhookPort))
		// Each replica reaches the apiserver through a proxy of its own,
		// which a test can cut (CutAPIServer, Kill).
		if r.proxy, err = newAPIProxy(apiURL.Host); err != nil {
			return nil, err
		}
		r.serve.RestConfig = rest.CopyConfig(e.Config)
		r.serve.RestConfig.Host = "https://" + r.proxy.addr()
		r.serve.ScalewayOptions = e.ScalewayOptions()
		r.serve.Log = zap.New(zap.WriteTo(logs)).WithValues("replica", r.Name)
		e.Replicas = append(e.Replicas, r)
	}
	if err := e.StartWebhook(); err != nil {
		return nil, err
	}
	if !o.NoCCM {
		if err := e.startCCM(logs); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// startCCM runs the CCM stand-in on every Service of the cluster, with the
// "nodes" network as the cluster's.
func (e *Env) startCCM(logs io.Writer) error {
	ccm, err := cloudcontroller.New(cloudcontroller.Options{
		Kube: e.Kube, Scaleway: e.ScalewayOptions(), ClusterPrivateNetworkID: e.PNs["nodes"].ID, Delay: e.o.CCMDelay,
		Logf: func(format string, args ...any) { fmt.Fprintf(logs, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ccm.Run(ctx) }()
	e.stopCCM = func() { cancel(); <-done }
	return nil
}

// WebhookCalls are the emulator's calls since the request log held from
// entries, per operation, less the CCM stand-in's and /metadata.
func (e *Env) WebhookCalls(from int) map[ipamtest.Op]int {
	out := map[ipamtest.Op]int{}
	reqs := e.Emu.Requests()
	for _, r := range reqs[min(from, len(reqs)):] {
		if r.Op != "" && r.Op != ipamtest.OpMetadata && !strings.Contains(r.UserAgent, cloudcontroller.UserAgent) {
			out[r.Op]++
		}
	}
	return out
}

// applyChart renders the chart's webhook configuration and Service (for a
// release named scw-lb-ipam in namespace scw-lb-ipam) and applies them.
func (e *Env) applyChart(ctx context.Context) error {
	chart := filepath.Join(e.o.Root, "charts", "scw-lb-ipam")
	args := []string{"template", release, chart, "--namespace", ReleaseNamespace,
		"--values", filepath.Join(chart, "ci", "self-managed-values.yaml"),
		"--show-only", "templates/mutatingwebhookconfiguration.yaml", "--show-only", "templates/service.yaml"}
	for _, s := range e.o.HelmSets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(filepath.Join(e.o.Root, "bin", "helm"), args...)
	home := filepath.Join(e.tmp, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := e.Kube.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	svc := &corev1.Service{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ReleaseNamespace, Name: release}, svc); err != nil {
		return err
	}
	e.service = net.JoinHostPort(svc.Spec.ClusterIP, "443")
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// route points the webhook Service at the replicas that serve.
func (e *Env) route() {
	var addrs []string
	for _, r := range e.Replicas {
		if r.Serving() {
			addrs = append(addrs, r.addr)
		}
	}
	e.egress.Route(e.service, addrs...)
}

// StartWebhook starts every replica that is not serving, and waits until
// each listens and the caBundle is in place.
func (e *Env) StartWebhook() error {
	for _, r := range e.Replicas {
		if !r.Serving() {
			if err := r.start(); err != nil {
				return err
			}
		}
	}
	e.route()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := e.Kube.Get(context.Background(), client.ObjectKey{Name: release}, mwc); err == nil && len(mwc.Webhooks) > 0 && len(mwc.Webhooks[0].ClientConfig.CABundle) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the caBundle was not patched within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopWebhook stops every replica (gracefully) and waits for them.
func (e *Env) StopWebhook() {
	for _, r := range e.Replicas {
		r.Stop()
	}
	e.route()
}

// Start runs app.Serve with fresh metrics and waits until it is ready, then
// the Service routes to it.
func (r *Replica) Start() error {
	if err := r.start(); err != nil {
		return err
	}
	r.env.route()
	return nil
}

func (r *Replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proxy.unblock()
	r.Metrics = prometheus.NewRegistry()
	r.serve.Metrics = r.Metrics
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.stopped = cancel, make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(r.stopped)
		errc <- app.Serve(ctx, r.serve)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("%s: serve returned: %w", r.Name, err)
		default:
		}
		// Routed to only once ready, as a Service's endpoints are: the
		// webhook serves and the caches have synced.
		if resp, err := http.Get(r.probe); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready within 60s", r.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends app.Serve gracefully (the lease is released) and waits for it.
func (r *Replica) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel == nil {
		return
	}
	r.cancel()
	select {
	case <-r.stopped:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "testenv: %s did not stop within 30s\n", r.Name)
	}
	r.cancel = nil
}

// Kill ends the replica as a killed pod ends: the Service stops routing to
// it, its connections to the apiserver drop first, so it releases nothing
// (its lease stays until it expires), then it stops.
func (r *Replica) Kill() {
	r.proxy.block()
	r.Stop()
	r.env.route()
}

// Leading reports whether the replica holds the sweeper's lease.
func (r *Replica) Leading() bool {
	r.mu.Lock()
	reg := r.Metrics
	r.mu.Unlock()
	if reg == nil || !r.Serving() {
		return false
	}
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "scw_lb_ipam_sweeper_leader" {
			for _, m := range f.GetMetric() {
				return m.GetGauge().GetValue() == 1
			}
		}
	}
	return false
}

// Serving reports whether the replica's app.Serve is running.
func (r *Replica) Serving() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel == nil {
		return false
	}
	select {
	case <-r.stopped:
		return false
	default:
		return true
	}
}

// CutAPIServer cuts every replica off from the apiserver (connections
// dropped, new ones refused) until the returned func is called; the
// apiserver still calls the webhook.
func (e *Env) CutAPIServer() (restore func()) {
	for _, r := range e.Replicas {
		r.proxy.block()
	}
	return func() {
		for _, r := range e.Replicas {
			r.proxy.unblock()
		}
	}
}

// Serving reports whether every replica is still running.
func (e *Env) Serving() bool {
	for _, r := range e.Replicas {
		if !r.Serving() {
			return false
		}
	}
	return true
}

// Stop stops everything: the replicas, then kube-apiserver and etcd
// (SIGTERM, then SIGKILL after the timeout), the proxies, the emulator, and
// removes temp files.
func (e *Env) Stop() {
	if e.stopCCM != nil {
		e.stopCCM()
	}
	e.StopWebhook()
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
		}
	}
	for _, r := range e.Replicas {
		r.proxy.close()
	}
	if e.egress != nil {
		e.egress.Close()
	}
	if e.Emu != nil {
		_ = e.Emu.Close()
	}
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
}

// Gather returns every replica's metric families, one after the other:
// callers sum what they read.
func (e *Env) Gather() []*dto.MetricFamily {
	var out []*dto.MetricFamily
	for _, r := range e.Replicas {
		if r.Metrics == nil {
			continue
		}
		families, _ := r.Metrics.Gather()
		out = append(out, families...)
	}
	return out
}

// Counter sums a counter family over its labels and the replicas (0 when
// absent).
func (e *Env) Counter(name string) float64 {
	total := 0.0
	for _, f := range e.Gather() {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// Creates is the number of CREATE admissions the replicas answered (the
// CCM's patches are UPDATEs).
func (e *Env) Creates() float64 {
	total := 0.0
	for _, f := range e.Gather() {
		if f.GetName() != "scw_lb_ipam_admissions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == "CREATE" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// ScalewayOptions point a Scaleway client at the emulator, as the webhook's.
func (e *Env) ScalewayOptions() []scw.ClientOption {
	return []scw.ClientOption{scw.WithAPIURL(e.Emu.URL()), scw.WithAuth(AccessKey, SecretKey), scw.WithDefaultProjectID(ipamtest.DefaultProjectID)}
}

// PoolFile is the pool file the webhook runs with.
func (e *Env) PoolFile() string { return e.o.PoolFile(e.PNs) }

// Total sums a gauge family over its labels and the replicas, -1 when
// absent.
func (e *Env) Total(name string) float64 {
	total, found := 0.0, false
	for _, f := range e.Gather() {
		if f.GetName() == name {
			found = true
			for _, m := range f.GetMetric() {
				total += m.GetGauge().GetValue()
			}
		}
	}
	if !found {
		return -1
	}
	return total
}

// Gauge reads a gauge's series whose labels include the given name/value
// pairs, e.g. Gauge("scw_lb_ipam_pool_addresses", "pool", "dc-link",
// "state", "total"), from the first replica that has it; -1 when absent.
func (e *Env) Gauge(name string, labels ...string) float64 {
	if len(labels)%2 != 0 {
		panic("testenv.Gauge: labels are name/value pairs")
	}
	for _, f := range e.Gather() {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
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
