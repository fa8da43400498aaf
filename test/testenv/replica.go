package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// Replica is one webhook process (app.Serve in process) with its own
// caches, metrics, serving port and connection to the apiserver.
type Replica struct {
	Name    string
	Metrics *prometheus.Registry

	env   *Env
	serve app.Options
	// handler, when set, is served instead of the Service mutator
	// (RestartWebhook).
	handler admission.Handler
	addr    string
	probe   string // its /readyz
	proxy   *apiProxy
	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
	// alloc is the running process's allocator; not under mu, which
	// start holds while app.New builds it.
	alloc atomic.Pointer[allocator.Allocator]
	// starts counts app.Serve runs: a restarted replica is a new process
	// (a new pod) with a new lease identity.
	starts atomic.Int32
}

// Incarnation names the replica's current process: its name and how many
// times it was started.
func (r *Replica) Incarnation() string {
	return fmt.Sprintf("%s#%d", r.Name, r.starts.Load())
}

// Allocator is the allocator of the replica's last start (nil before the
// first): what its views and index hold, without a call.
func (r *Replica) Allocator() *allocator.Allocator { return r.alloc.Load() }

// Remembers reports whether the replica's Service cache has shown it id on
// svc and it is still a hint (see inventory.Inventory.Hinted): a re-create of
// svc through this replica re-reads it.
func (r *Replica) Remembers(svc types.NamespacedName, id string) bool {
	alloc := r.alloc.Load()
	return alloc != nil && slices.Contains(alloc.Inventory().Hinted(svc), id)
}

// route points the webhook Service at the replicas that serve.
func (e *Env) route() {
	if e.ControlPlane == nil {
		return // a Start that failed before the control plane stops its replicas
	}
	var addrs []string
	for _, r := range e.Replicas {
		if r.Serving() {
			addrs = append(addrs, r.addr)
		}
	}
	e.Egress.Route(e.service, addrs...)
}

// RouteTo sends the webhook Service's connections to rs only, as if the
// others had no endpoint, until restore (or a replica starts or stops).
func (e *Env) RouteTo(rs ...*Replica) (restore func()) {
	addrs := make([]string, 0, len(rs))
	for _, r := range rs {
		addrs = append(addrs, r.addr)
	}
	e.Egress.Route(e.service, addrs...)
	return e.route
}

// gather is the replica's metric families; nil before its first start.
func (r *Replica) gather() []*dto.MetricFamily {
	r.mu.Lock()
	reg := r.Metrics
	r.mu.Unlock()
	if reg == nil {
		return nil
	}
	families, _ := reg.Gather()
	return families
}

// Gauge reads a gauge of this replica with the given label pairs
// ("pool", "dc-link"); false when it does not export it.
func (r *Replica) Gauge(name string, labels ...string) (float64, bool) {
	m, ok := r.metric(name, labels)
	return m.GetGauge().GetValue(), ok
}

// Counter reads a counter of this replica with the given label pairs;
// false when it does not export it.
func (r *Replica) Counter(name string, labels ...string) (float64, bool) {
	m, ok := r.metric(name, labels)
	return m.GetCounter().GetValue(), ok
}

// metric is the series of this replica's metric name with the given label
// pairs; nil, false when it does not export it.
func (r *Replica) metric(name string, labels []string) (*dto.Metric, bool) {
	for _, f := range r.gather() {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				return m, true
			}
		}
	}
	return nil, false
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
	patched := localrun.Poll(60*time.Second, 100*time.Millisecond, func() bool {
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		err := e.Kube.Get(context.Background(), client.ObjectKey{Name: release}, mwc)
		return err == nil && len(mwc.Webhooks) > 0 && len(mwc.Webhooks[0].ClientConfig.CABundle) > 0
	})
	if !patched {
		return errors.New("the caBundle was not patched within 60s")
	}
	return nil
}

// StopWebhook stops every replica (gracefully) and waits for them.
func (e *Env) StopWebhook() {
	for _, r := range e.Replicas {
		r.Stop()
	}
	e.route()
}

// RestartWebhook stops every replica, then starts them serving h instead of
// the Service mutator (nil: the mutator again), with the same caches,
// readiness and TLS: the benchmarks measure a no-op webhook and the real
// one on the same control plane.
func (e *Env) RestartWebhook(h admission.Handler) error {
	e.StopWebhook()
	for _, r := range e.Replicas {
		r.mu.Lock()
		r.handler = h
		r.mu.Unlock()
	}
	return e.StartWebhook()
}

// configure sets the replica's serve options as the chart's pods run them
// (pool file pools, self-managed TLS), its ports, and its own proxy to the
// apiserver at apiHost, which a test can cut (CutAPIServer, Kill).
func (r *Replica) configure(pools, apiHost string) error {
	probe, err := localrun.FreePort()
	if err != nil {
		return err
	}
	r.probe = fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)
	args := append([]string{"--config", pools, "--metrics-bind-address", "0", "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probe),
		"--leader-election-namespace", ReleaseNamespace, "--excluded-namespaces", "kube-system", "--shutdown-delay", "0s",
		"--webhook-host", "127.0.0.1", "--webhook-port", "9443", "--tls-mode", "cert-manager"}, r.env.o.Args...)
	if r.env.keyDir != "" {
		args = append(args, "--scaleway-key-dir", r.env.keyDir)
	}
	if r.serve, err = app.ParseFlags(args); err != nil {
		return err
	}
	// Self-managed TLS, as the chart runs it: a CA and serving
	// certificate in a Secret the replicas share, the caBundle kept.
	r.serve.SelfManagedTLS, r.serve.Certs.Namespace = true, ReleaseNamespace
	r.serve.Certs.SecretName, r.serve.Certs.ServiceName, r.serve.Certs.WebhookConfigName = release+"-tls", release, release
	r.serve.Webhook.Excluded = append(r.serve.Webhook.Excluded, ReleaseNamespace)
	r.serve.Server.CertDir = filepath.Join(r.env.tmp, r.Name, "certs")
	if r.serve.Server.Port, err = localrun.FreePort(); err != nil {
		return err
	}
	r.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.serve.Server.Port))
	if r.proxy, err = newAPIProxy(apiHost); err != nil {
		return err
	}
	r.serve.RestConfig = rest.CopyConfig(r.env.Config)
	r.serve.RestConfig.Host = "https://" + r.proxy.addr()
	r.serve.ScalewayOptions = r.env.ScalewayOptions()
	r.serve.Log = zap.New(zap.WriteTo(r.env.logs())).WithValues("replica", r.Name)
	return nil
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
	if r.cancel != nil {
		select {
		case <-r.stopped:
		default:
			return nil // serving already: a second app.Serve would leak
		}
	}
	r.proxy.unblock()
	r.Metrics = prometheus.NewRegistry()
	r.serve.Metrics = r.Metrics
	r.alloc.Store(nil)
	r.starts.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	built, err := app.New(ctx, r.serve)
	if err != nil {
		cancel()
		return fmt.Errorf("%s: serve returned: %w", r.Name, err)
	}
	r.alloc.Store(built.Allocator)
	if r.handler != nil {
		built.Handler = r.handler
	}
	r.cancel, r.stopped = cancel, make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(r.stopped)
		errc <- built.Start(ctx)
	}()
	var served error // serve's return, if it returned before ready
	ready := localrun.Poll(60*time.Second, 100*time.Millisecond, func() bool {
		select {
		case err := <-errc:
			served = fmt.Errorf("%s: serve returned: %w", r.Name, err)
			return true
		default:
		}
		// Routed to only once ready, as a Service's endpoints are: the
		// webhook serves and the caches have synced.
		resp, err := http.Get(r.probe)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	switch {
	case served != nil:
		return served
	case !ready:
		return fmt.Errorf("%s: not ready within 60s", r.Name)
	}
	return nil
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
	if !r.Serving() {
		return false
	}
	for _, f := range r.gather() {
		if f.GetName() == "scw_lb_ipam_sweeper_leader" {
			for _, m := range f.GetMetric() {
				return m.GetGauge().GetValue() == 1
			}
		}
	}
	return false
}

// Sweeps is the number of sweeper cycles this replica's current process
// has run (it sweeps only while it leads).
func (r *Replica) Sweeps() uint64 {
	n, _ := r.SweepTime()
	return n
}

// SweepTime is the number of sweeper cycles this replica's current process
// has run and the time they took, from one reading of its metrics.
func (r *Replica) SweepTime() (cycles uint64, took time.Duration) {
	for _, f := range r.gather() {
		if f.GetName() == "scw_lb_ipam_sweeper_cycle_duration_seconds" {
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				return h.GetSampleCount(), time.Duration(h.GetSampleSum() * float64(time.Second))
			}
		}
	}
	return 0, 0
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
