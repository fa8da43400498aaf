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

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/certs"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/version"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/claims"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// Serve runs until ctx ends or a component fails: it loads the pool file,
// checks it against Scaleway, then sets up each concern in one manager —
// the certificates, the webhook, the sweeper, the pool-file reload and the
// metrics — and starts it.
func Serve(ctx context.Context, o Options) error {
	log := o.Log
	if log.GetSink() == nil {
		log = zap.New(zap.UseFlagOptions(&o.Zap))
	}
	ctrl.SetLogger(log)
	// client-go's leader election and reflectors log through klog: the same
	// structured logger, not klog's own format on stderr.
	klog.SetLogger(log)
	reg := o.Metrics
	if reg == nil {
		reg = metrics.Registry
	}

	cfg, data, err := loadConfig(o.ConfigFile)
	if err != nil {
		return err
	}
	if err := o.retention().Check(cfg); err != nil {
		return fmt.Errorf("%s: %w", o.ConfigFile, err)
	}
	calls := newCallMetrics(reg)
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: cfg.Region, Observe: calls.observe, ClientOptions: o.ScalewayOptions})
	if err != nil {
		return err
	}
	if err := cfg.Resolve(ctx, cloud); err != nil {
		return err
	}

	mgr, err := o.newManager()
	if err != nil {
		return err
	}
	if o.TLS.SelfManaged {
		if err := certs.SetupWithManager(ctx, mgr, o.certsOptions(log)); err != nil {
			return err
		}
	}
	leases := &claims.Leases{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.claimsNamespace(),
		Fresh: o.margin(), Clock: clock.RealClock{}}
	inv := ipam.NewInventory(ipam.InventoryOptions{Cloud: cloud, Config: cfg, Retention: o.retention(),
		OccupancyTTL: o.OccupancyTTL, RefreshInterval: o.IndexRefresh, Log: log.WithName("inventory")})
	if err := mgr.Add(inv); err != nil {
		return err
	}
	alloc := ipam.NewAllocator(ipam.AllocatorOptions{
		Inventory:  inv,
		Cloud:      cloud,
		References: ccm.References{Reader: mgr.GetCache()},
		Claims:     leases,
		Retention:  o.retention(),
		Log:        log.WithName("allocator"),
	})
	if o.Built != nil {
		o.Built(alloc)
	}
	if err := webhook.SetupWithManager(ctx, mgr, webhook.Options{Path: WebhookPath, Allocator: alloc, Excluded: o.Excluded,
		Timeout: o.WebhookTimeout, Registerer: reg, Log: log.WithName("webhook"), Handler: o.Handler}); err != nil {
		return err
	}
	if _, err := sweeper.SetupWithManager(ctx, mgr, o.sweeperOptions(cloud, alloc, leases, reg, log), o.election(reg, log)); err != nil {
		return err
	}
	if err := setupConfigReloadWithManager(mgr, reloadOptions{path: o.ConfigFile, every: o.ConfigPollEvery, loaded: data,
		cloud: cloud, alloc: alloc, policy: o.retention(), reg: reg, log: log.WithName("config")}); err != nil {
		return err
	}
	if err := setupMetricsWithManager(reg, inv); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("pools-listed", func(*http.Request) error {
		if !inv.Listed() {
			return errors.New("the pools' subnets have not been listed yet")
		}
		return nil
	}); err != nil {
		return err
	}
	mgrCtx, stopMgr, err := drainOnStop(ctx, mgr, o.ShutdownDelay, log)
	if err != nil {
		return err
	}
	defer stopMgr()
	log.Info("starting", "version", version.Version(), "revision", version.Revision(), "clusterName", cfg.ClusterName, "region", cfg.Region, "pools", len(cfg.Pools), "sha256", fileHash(data), "webhookPort", o.WebhookPort)
	return mgr.Start(mgrCtx)
}

// drainOnStop returns the context the manager runs in: when ctx ends (a
// SIGTERM: a rollout, a drain), /readyz fails at once, and the manager
// stops only delay later. The apiserver keeps calling a pod until its
// endpoint is gone, which takes the failed probe plus its propagation;
// a webhook that stopped listening first fails those admissions, and with
// failurePolicy Fail the Service changes with them.
func drainOnStop(ctx context.Context, mgr manager.Manager, delay time.Duration, log logr.Logger) (context.Context, context.CancelFunc, error) {
	var draining atomic.Bool
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
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// cacheOptions: only Services and Namespaces are read, and only from the
// cache. The cache holds every Service of the cluster for the life of the
// process: each is trimmed to what this process reads (ccm.TrimService)
// before it is stored.
func cacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Service{}:   {Transform: ccm.TrimService},
		&corev1.Namespace{}: {},
	}}
}

// certsOptions configure the self-managed certificates.
func (o Options) certsOptions(log logr.Logger) certs.Options {
	return certs.Options{Namespace: o.TLS.Namespace, SecretName: o.TLS.SecretName, ServiceName: o.TLS.ServiceName,
		WebhookConfigName: o.TLS.WebhookConfig, CertDir: o.CertDir, Log: log.WithName("certs")}
}

// sweeperOptions configure the sweeper from the flags and the components
// it shares with the webhook.
func (o Options) sweeperOptions(cloud scaleway.Cloud, alloc *ipam.Allocator, leases *claims.Leases, reg prometheus.Registerer, log logr.Logger) sweeper.Options {
	return sweeper.Options{
		Cloud:               cloud,
		Config:              alloc.Config,
		Interval:            o.Sweep.Interval,
		PendingGrace:        o.Sweep.PendingGrace,
		MaxReleasesPerCycle: o.Sweep.MaxReleases,
		ReportOnly:          o.Sweep.ReportOnly,
		ReleaseRemovedPools: o.Sweep.ReleaseRemovedPools,
		ConvergenceGrace:    o.Sweep.ConvergenceGrace,
		Excluded:            o.Excluded,
		Claims:              leases,
		Metrics:             sweeper.NewMetrics(reg),
		Log:                 log.WithName("sweeper"),
	}
}

// election is the sweeper's leader election.
func (o Options) election(reg prometheus.Registerer, log logr.Logger) sweeper.Election {
	return sweeper.Election{Enabled: o.LeaderElect, Namespace: o.claimsNamespace(), LeaseDuration: o.Leader.LeaseDuration,
		RenewDeadline: o.Leader.RenewDeadline, RetryPeriod: o.Leader.RetryPeriod, Registerer: reg, Log: log.WithName("leader")}
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
