package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/certs"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/version"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/claims"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// Serve runs until ctx ends or a component fails: New, then Start.
func Serve(ctx context.Context, o Options) error {
	r, err := New(ctx, o)
	if err != nil {
		return err
	}
	return r.Start(ctx)
}

// Replica is what New built for one process: every concern set up in one
// manager, not started yet. Tests read it (the allocator's views) instead
// of hooking into Serve.
type Replica struct {
	Manager   manager.Manager
	Config    *ipam.Config
	Inventory *inventory.Inventory
	Allocator *allocator.Allocator
	// Handler is what Start serves at WebhookPath: the Service mutator New
	// built. The benchmarks' no-op baseline replaces it before Start, to
	// measure the serving path alone.
	Handler admission.Handler

	o    Options
	data []byte // the pool file as loaded
	key  *scaleway.Key
	log  logr.Logger
}

// New loads the pool file, checks it against Scaleway, then sets up each
// concern in one manager: the certificates, the inventory, the webhook, the
// sweeper, the pool-file reload and the metrics. ctx bounds those checks
// and the informers the setup asks for; pass Start the same.
func New(ctx context.Context, o Options) (*Replica, error) {
	r := &Replica{o: o, log: o.Log}
	if r.log.GetSink() == nil {
		r.log = zap.New(zap.UseFlagOptions(&o.Zap))
	}
	ctrl.SetLogger(r.log)
	// client-go's leader election and reflectors log through klog: the same
	// structured logger, not klog's own format on stderr.
	klog.SetLogger(r.log)
	reg := o.Metrics
	if reg == nil {
		reg = metrics.Registry
	}
	var err error
	if r.Config, r.data, err = loadConfig(o.ConfigFile); err != nil {
		return nil, err
	}
	if err := o.retention().Check(r.Config); err != nil {
		return nil, fmt.Errorf("%s: %w", o.ConfigFile, err)
	}
	calls := newCallMetrics(reg)
	if r.key, err = newKey(o.KeyDir); err != nil {
		return nil, err
	}
	if ak := r.key.AccessKey(); ak != "" {
		r.log.Info("Scaleway API key in use", "accessKey", ak, "dir", o.KeyDir)
	}
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: r.Config.Region, Observe: calls.observe, Key: r.key, ClientOptions: o.ScalewayOptions})
	if err != nil {
		return nil, err
	}
	if err := inventory.Resolve(ctx, cloud, r.Config); err != nil {
		return nil, err
	}
	if r.Manager, err = o.newManager(); err != nil {
		return nil, err
	}
	if err := r.setup(ctx, cloud, reg); err != nil {
		return nil, err
	}
	return r, nil
}

// setup adds each concern to the manager, in the order they depend on one
// another, each from its own Options and what they share.
func (r *Replica) setup(ctx context.Context, cloud scaleway.Cloud, reg prometheus.Registerer) error {
	o, mgr, log := r.o, r.Manager, r.log
	if o.SelfManagedTLS {
		if err := certs.SetupWithManager(ctx, mgr, o.certsOptions(log)); err != nil {
			return err
		}
	}
	// One watch of Services for the process: the webhook, the allocator's
	// References and the sweeper all read its Records.
	services, err := servicecache.NewInformer(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := mgr.Add(services); err != nil {
		return err
	}
	leases := &claims.Leases{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.claimsNamespace(),
		Fresh: o.margin(), Clock: clock.RealClock{}}
	inv := o.Inventory
	inv.Cloud, inv.Config, inv.Retention, inv.Log = cloud, r.Config, o.retention(), log.WithName("inventory")
	r.Inventory = inventory.New(inv)
	if err := mgr.Add(r.Inventory); err != nil {
		return err
	}
	r.Allocator, err = allocator.New(allocator.Options{Inventory: r.Inventory, Cloud: cloud,
		References: services.Records(), Claims: leases, Retention: o.retention(), Log: log.WithName("allocator")})
	if err != nil {
		return err
	}
	hook := o.Webhook
	hook.Allocator, hook.Registerer, hook.Log = r.Allocator, reg, log.WithName("webhook")
	mutator, err := webhook.SetupWithManager(ctx, mgr, services, hook)
	if err != nil {
		return err
	}
	r.Handler = mutator
	if err := r.setupSweeper(ctx, services, o.sweeperOptions(cloud, r.Allocator, leases, reg, log), reg); err != nil {
		return err
	}
	if err := setupConfigReloadWithManager(mgr, reloadOptions{path: o.ConfigFile, every: o.ConfigPollEvery, loaded: r.data,
		cloud: cloud, alloc: r.Allocator, policy: o.retention(), reg: reg, log: log.WithName("config")}); err != nil {
		return err
	}
	candidate := func(ctx context.Context, k *scaleway.Key) (scaleway.Cloud, error) {
		return scaleway.New(ctx, scaleway.Options{Region: r.Config.Region, Key: k, ClientOptions: o.ScalewayOptions})
	}
	if err := setupKeyWithManager(mgr, &keyReloader{dir: o.KeyDir, every: o.ConfigPollEvery, key: r.key, cloud: cloud, candidate: candidate,
		config: r.Allocator.Config, clock: clock.RealClock{}, log: log.WithName("key")}, reg); err != nil {
		return err
	}
	if err := setupMetricsWithManager(reg, r.Inventory); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("pools-listed", func(*http.Request) error {
		if !r.Inventory.Listed() {
			return errors.New("the pools' subnets have not been listed yet")
		}
		return nil
	})
}

// setupSweeper runs the sweeper, on the leader, with the view it writes
// (--view).
func (r *Replica) setupSweeper(ctx context.Context, services *servicecache.Informer, sweep sweeper.Options, reg prometheus.Registerer) error {
	if r.o.View {
		var err error
		if sweep.View, err = r.mirror(); err != nil {
			return err
		}
	}
	_, err := sweeper.SetupWithManager(ctx, r.Manager, services, sweep, r.o.election(reg, r.log))
	return err
}

// mirror is the view the sweeper's leader writes: the pools' counts from
// the inventory, which the metrics and status read too. Its writes have a
// client of their own (view.QPS).
func (r *Replica) mirror() (*view.Mirror, error) {
	cfg := rest.CopyConfig(r.Manager.GetConfig())
	cfg.QPS, cfg.Burst = view.QPS, 2*view.QPS
	c, err := client.New(cfg, client.Options{Scheme: r.Manager.GetScheme(), Mapper: r.Manager.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("the view's client: %w", err)
	}
	return view.NewMirror(view.Options{Client: c, Reader: r.Manager.GetAPIReader(), Log: r.log.WithName("view"),
		Pools: func() []view.Pool { return view.PoolsOf(r.Allocator.Config(), r.Inventory.Stats()) }}), nil
}

// Start serves Handler at WebhookPath and runs the manager until ctx ends
// (then drains, see drainOnStop) or a component fails.
func (r *Replica) Start(ctx context.Context) error {
	var draining atomic.Bool
	webhook.Register(r.Manager, r.o.Webhook, r.Handler, draining.Load)
	mgrCtx, stopMgr, err := drainOnStop(ctx, r.Manager, r.o.ShutdownDelay, &draining, r.log)
	if err != nil {
		return err
	}
	defer stopMgr()
	cfg := r.Config
	r.log.Info("starting", "version", version.Version(), "revision", version.Revision(), "clusterName", cfg.ClusterName, "region", cfg.Region, "pools", len(cfg.Pools), "sha256", fileHash(r.data), "webhookPort", r.o.Server.Port)
	return r.Manager.Start(mgrCtx)
}

// drainOnStop returns the context the manager runs in: when ctx ends (a
// SIGTERM: a rollout, a drain), /readyz fails at once, and the manager
// stops only delay later. The apiserver keeps calling a pod until its
// endpoint is gone, which takes the failed probe plus its propagation;
// a webhook that stopped listening first fails those admissions, and with
// failurePolicy Fail the Service changes with them. draining is set then:
// the webhook answers with Connection: close from that moment (Register),
// so the apiserver drops its pooled connections to this pod while it still
// listens. A connection idle for the whole delay is closed by the server's
// shutdown; a request the apiserver writes on it at that very instant is
// the race any HTTP/1.1 server's idle close has.
func drainOnStop(ctx context.Context, mgr manager.Manager, delay time.Duration, draining *atomic.Bool, log logr.Logger) (context.Context, context.CancelFunc, error) {
	if err := mgr.AddReadyzCheck("not-stopping", func(*http.Request) error {
		if draining.Load() {
			return errors.New("stopping")
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	mgrCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-mgrCtx.Done(): // the manager ended on its own
			return
		case <-ctx.Done():
		}
		draining.Store(true)
		log.Info("stopping: not ready any more, serving admissions a while longer", "delay", delay)
		select {
		case <-time.After(delay):
		case <-mgrCtx.Done():
		}
		stop()
	}()
	return mgrCtx, stop, nil
}

// newManager makes the manager every concern runs in, with the process's
// liveness check.
func (o Options) newManager() (manager.Manager, error) {
	restCfg := o.RestConfig
	if restCfg == nil {
		var err error
		if restCfg, err = restConfig(o.Kubeconfig); err != nil {
			return nil, err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                o.metricsServerOptions(),
		HealthProbeBindAddress: o.ProbeAddr,
		// Leader election is the sweeper's own (sweeper.Election): losing
		// the lease must not end the process that serves the webhook.
		LeaderElection: false,
		WebhookServer:  crwebhook.NewServer(o.webhookServerOptions()),
		Cache:          cacheOptions(),
		Client:         clientOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// cacheOptions: only Namespaces are read from the manager's cache.
// Services are held by the process's servicecache.Informer, as Records: a
// cache of corev1.Service would hold every Service of the cluster three
// times as large.
func cacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Namespace{}: {},
	}}
}

// clientOptions: the manager's client reads Services from the apiserver,
// never from its cache, which does not hold them (it would start a second
// watch of every Service).
func clientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Service{}}}}
}

// certsOptions configure the self-managed certificates.
func (o Options) certsOptions(log logr.Logger) certs.Options {
	c := o.Certs
	c.CertDir, c.Log = o.Server.CertDir, log.WithName("certs")
	return c
}

// sweeperOptions are the sweeper's flags and the components it shares
// with the webhook.
func (o Options) sweeperOptions(cloud scaleway.Cloud, alloc *allocator.Allocator, leases *claims.Leases, reg prometheus.Registerer, log logr.Logger) sweeper.Options {
	s := o.Sweep
	s.Cloud, s.Config, s.Excluded, s.Claims = cloud, alloc.Config, o.Webhook.Excluded, leases
	s.Margin = o.margin()
	s.Metrics, s.Log = sweeper.NewMetrics(reg), log.WithName("sweeper")
	return s
}

// election is the sweeper's leader election.
func (o Options) election(reg prometheus.Registerer, log logr.Logger) sweeper.Election {
	e := o.Leader
	e.Namespace, e.Registerer, e.Log = o.claimsNamespace(), reg, log.WithName("leader")
	return e
}

// loadConfig reads and validates the pool file.
func loadConfig(path string) (*ipam.Config, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the pool file: %w (set --config)", err)
	}
	cfg, err := ipam.ParseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, data, nil
}

var errNoKubeconfig = errors.New("no Kubernetes configuration: run in a cluster, set --kubeconfig or $KUBECONFIG")
