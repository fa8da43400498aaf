package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/scaleway/scaleway-sdk-go/scw"
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
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/certs"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/version"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// WebhookPath is where the Service mutator is served; the chart's
// MutatingWebhookConfiguration points here.
const WebhookPath = "/mutate-v1-service"

// Options are the flags of "serve", validated before anything starts, and
// the hooks an embedding test sets instead of flags.
type Options struct {
	ConfigFile  string
	CertDir     string
	WebhookHost string
	WebhookPort int
	MetricsAddr string
	// MetricsSecure serves the metrics over HTTPS, to callers the apiserver
	// authenticates (TokenReview) and authorizes (SubjectAccessReview, get
	// on the non-resource URL /metrics); false serves plain HTTP to anyone.
	MetricsSecure bool
	// EnableHTTP2 lets the webhook and metrics servers negotiate HTTP/2;
	// off, they serve HTTP/1.1 only (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2     bool
	ProbeAddr       string
	Excluded        []string
	LeaderElect     bool
	LeaderElectNS   string
	Leader          leaderOptions
	Kubeconfig      string
	OccupancyTTL    time.Duration
	ConfigPollEvery time.Duration
	// WebhookTimeout is the webhook configuration's timeoutSeconds: the
	// admission deadline is derived from it, and the reuse safety margin is
	// twice it.
	WebhookTimeout time.Duration
	Sweep          sweepOptions
	TLS            tlsOptions
	Zap            zap.Options

	// RestConfig, when set, is used instead of --kubeconfig.
	RestConfig *rest.Config
	// ScalewayOptions add to the SDK environment (tests point it at the
	// emulator).
	ScalewayOptions []scw.ClientOption
	// Metrics receives the project's metrics; default controller-runtime's
	// registry, which the metrics endpoint serves.
	Metrics prometheus.Registerer
	// Log replaces the zap logger built from the flags.
	Log logr.Logger
}

// tlsOptions choose who provides the serving certificate.
type tlsOptions struct {
	// SelfManaged: the certs package keeps a CA and certificate in a Secret
	// and patches the caBundle. Otherwise (cert-manager) the files in
	// CertDir are provided and the caBundle injected by someone else.
	SelfManaged   bool
	Namespace     string
	SecretName    string
	ServiceName   string
	WebhookConfig string
}

// sweepOptions are the sweeper's knobs.
type sweepOptions struct {
	Interval            time.Duration
	PendingGrace        time.Duration
	MaxReleases         int
	ReportOnly          bool
	ReleaseRemovedPools bool
}

// ParseFlags reads the flags of "serve".
func ParseFlags(args []string) (Options, error) {
	o := Options{Zap: zap.Options{}}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&o.ConfigFile, "config", "/etc/scw-lb-ipam/pools.yaml", "pool file; reloaded when it changes (a bad file keeps the last good one)")
	fs.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding tls.crt and tls.key, reloaded when they change")
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "address the webhook server listens on (empty: all)")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint (0 disables it)")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "serve the metrics over HTTPS to callers the apiserver authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone who reaches the port")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", false, "let the webhook and metrics servers negotiate HTTP/2; off by default (HTTP/2 Rapid Reset and stream cancellation, CVE-2023-44487 and CVE-2023-39325)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	excluded := fs.String("excluded-namespaces", "kube-system", "comma-separated namespaces never touched, in addition to the release namespace")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader for the sweeper (the webhook runs on every replica)")
	fs.StringVar(&o.LeaderElectNS, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's namespace)")
	fs.DurationVar(&o.Leader.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease blocks the others")
	fs.DurationVar(&o.Leader.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives the sweeper up (the webhook keeps serving)")
	fs.DurationVar(&o.Leader.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "time between campaign and renew attempts")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, or $KUBECONFIG)")
	fs.DurationVar(&o.OccupancyTTL, "occupancy-ttl", 5*time.Minute, "how long a listing of a subnet's booked addresses is trusted for picking")
	fs.DurationVar(&o.ConfigPollEvery, "config-poll-interval", 10*time.Second, "how often the pool file is checked for changes")
	fs.DurationVar(&o.WebhookTimeout, "webhook-timeout", webhook.DefaultAdmissionTimeout, "the webhook configuration's timeoutSeconds; admissions answer within it, and a retained IP is taken back only while its release is more than twice this away")
	fs.DurationVar(&o.Sweep.Interval, "sweep-interval", sweeper.DefaultInterval, "time between sweeper cycles (Service deletions trigger one sooner)")
	fs.DurationVar(&o.Sweep.PendingGrace, "pending-grace", sweeper.DefaultPendingGrace, "retention of a reservation whose Service was never created")
	fs.IntVar(&o.Sweep.MaxReleases, "max-releases-per-cycle", sweeper.DefaultMaxReleases, "most reservations one sweeper cycle releases")
	fs.BoolVar(&o.Sweep.ReportOnly, "sweep-report-only", false, "log and count what the sweeper would release, release nothing")
	fs.BoolVar(&o.Sweep.ReleaseRemovedPools, "release-removed-pools", false, "let the sweeper release reservations of pools no longer in the pool file")
	tlsMode := fs.String("tls-mode", "self-managed", "who provides the serving certificate: self-managed (a Secret kept by scw-lb-ipam) or cert-manager (files mounted in --cert-dir)")
	fs.StringVar(&o.TLS.SecretName, "tls-secret", "scw-lb-ipam-tls", "self-managed mode: the Secret holding the CA and serving certificate")
	fs.StringVar(&o.TLS.ServiceName, "webhook-service", "scw-lb-ipam", "self-managed mode: the webhook's Service, whose DNS names the certificate covers")
	fs.StringVar(&o.TLS.WebhookConfig, "webhook-config", "scw-lb-ipam", "self-managed mode: the MutatingWebhookConfiguration whose caBundle is kept")
	o.Zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	for _, ns := range strings.Split(*excluded, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.Excluded = append(o.Excluded, ns)
		}
	}
	// The release namespace (where the webhook's own pods run) is always
	// excluded: the webhook must never be needed to admit itself.
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		o.Excluded = append(o.Excluded, ns)
		if o.LeaderElectNS == "" {
			o.LeaderElectNS = ns
		}
	}
	switch *tlsMode {
	case "self-managed":
		o.TLS.SelfManaged = true
		o.TLS.Namespace = os.Getenv("POD_NAMESPACE")
		if o.TLS.Namespace == "" {
			return o, fmt.Errorf("--tls-mode self-managed keeps its Secret in the pod's namespace: set POD_NAMESPACE (the chart does)")
		}
	case "cert-manager":
	default:
		return o, fmt.Errorf("--tls-mode %q: use self-managed or cert-manager", *tlsMode)
	}
	if o.WebhookPort <= 0 || o.WebhookPort > 65535 {
		return o, fmt.Errorf("--webhook-port %d is not a port", o.WebhookPort)
	}
	if o.Sweep.Interval < time.Second || o.Sweep.PendingGrace < time.Second || o.Sweep.MaxReleases < 1 {
		return o, fmt.Errorf("--sweep-interval and --pending-grace must be at least 1s and --max-releases-per-cycle at least 1")
	}
	if o.WebhookTimeout < time.Second || o.WebhookTimeout > 30*time.Second {
		return o, fmt.Errorf("--webhook-timeout %s: the apiserver allows 1s to 30s; pass the webhook configuration's timeoutSeconds", o.WebhookTimeout)
	}
	if m := o.margin(); o.Sweep.PendingGrace < m {
		return o, fmt.Errorf("--pending-grace %s is shorter than the reuse safety margin %s (twice --webhook-timeout); use at least %s", o.Sweep.PendingGrace, m, m)
	}
	if l := o.Leader; l.RetryPeriod <= 0 || l.RenewDeadline <= l.RetryPeriod || l.LeaseDuration <= l.RenewDeadline {
		return o, fmt.Errorf("leader election timings: need --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0", l.LeaseDuration, l.RenewDeadline, l.RetryPeriod)
	}
	if o.OccupancyTTL < time.Second {
		return o, fmt.Errorf("--occupancy-ttl %s is too short; use a minute or more", o.OccupancyTTL)
	}
	return o, nil
}

// margin is the release protocol's safety margin: twice the admission
// deadline (see ipam.Retention).
func (o Options) margin() time.Duration { return 2 * o.WebhookTimeout }

// retention is the release protocol the allocator and the sweeper share.
func (o Options) retention() ipam.Retention {
	return ipam.Retention{PendingGrace: o.Sweep.PendingGrace, Margin: o.margin()}
}

// Serve runs until ctx ends or a component fails.
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

	restCfg := o.RestConfig
	if restCfg == nil {
		if restCfg, err = restConfig(o.Kubeconfig); err != nil {
			return err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	var keeper *certs.Keeper
	if o.TLS.SelfManaged {
		// The webhook server needs its files before it starts: make sure of
		// them first, through a direct client (the cache is not up yet).
		direct, err := client.New(restCfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		keeper = certs.New(certs.Options{Client: direct, Namespace: o.TLS.Namespace, SecretName: o.TLS.SecretName,
			ServiceName: o.TLS.ServiceName, WebhookConfigName: o.TLS.WebhookConfig, CertDir: o.CertDir, Log: log.WithName("certs")})
		if err := keeper.Ensure(ctx); err != nil {
			return fmt.Errorf("self-managed TLS: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                o.metricsServerOptions(),
		HealthProbeBindAddress: o.ProbeAddr,
		// Leader election is the sweeper's own (leaderRunner): losing the
		// lease must not end the process that serves the webhook.
		LeaderElection: false,
		WebhookServer:  crwebhook.NewServer(o.webhookServerOptions()),
		// Only Services and Namespaces are read, and only from the cache.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Service{}: {}, &corev1.Namespace{}: {},
		}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	claims := &webhook.LeaseClaims{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.claimsNamespace(),
		Fresh: o.margin(), Clock: clock.RealClock{}}
	alloc := ipam.NewAllocator(ipam.AllocatorOptions{
		Cloud: cloud, Config: cfg, OccupancyTTL: o.OccupancyTTL,
		References: ccm.References{Reader: mgr.GetCache()},
		Claims:     claims,
		Retention:  o.retention(),
		Log:        log.WithName("allocator"),
	})
	gauge := newConfigGauge(reg)
	gauge.loaded(data)
	if err := setup(ctx, mgr, restCfg, alloc, cloud, claims, gauge, o, log, reg); err != nil {
		return err
	}
	if keeper != nil {
		if err := mgr.Add(keeper); err != nil {
			return err
		}
	}
	log.Info("starting", "version", version.Version(), "revision", version.Revision(), "clusterName", cfg.ClusterName, "region", cfg.Region, "pools", len(cfg.Pools), "sha256", fileHash(data), "webhookPort", o.WebhookPort)
	return mgr.Start(ctx)
}

// tlsOpts adjust the TLS configuration of the webhook and metrics servers.
// Both offer HTTP/2 by default; unless --enable-http2, they offer HTTP/1.1
// only, as kubebuilder scaffolds since the HTTP/2 Rapid Reset and stream
// cancellation attacks (CVE-2023-44487, CVE-2023-39325): the apiserver and
// Prometheus speak HTTP/1.1 just as well, and a server that never speaks
// HTTP/2 cannot be hit by them.
func (o Options) tlsOpts() []func(*tls.Config) {
	if o.EnableHTTP2 {
		return nil
	}
	return []func(*tls.Config){http1Only}
}

func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// webhookServerOptions configure the admission webhook server.
func (o Options) webhookServerOptions() crwebhook.Options {
	return crwebhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.CertDir, TLSOpts: o.tlsOpts()}
}

// metricsServerOptions configure the metrics endpoint. Secure, it serves
// the webhook's own certificate (CertDir: the Service's DNS names, signed by
// the webhook's CA), so a scraper can verify it, and lets through only
// callers the apiserver authenticates and authorizes for get on /metrics.
func (o Options) metricsServerOptions() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr, TLSOpts: o.tlsOpts()}
	if o.MetricsSecure {
		m.SecureServing = true
		m.CertDir = o.CertDir
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

// setup wires every component into the manager: one entry point each.
func setup(ctx context.Context, mgr manager.Manager, restCfg *rest.Config, alloc *ipam.Allocator, cloud scaleway.Cloud, claims *webhook.LeaseClaims, gauge *configGauge, o Options, log logr.Logger, reg prometheus.Registerer) error {
	if err := ccm.IndexServices(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing Services: %w", err)
	}
	mutator := &webhook.ServiceMutator{
		Allocator:  alloc,
		Namespaces: mgr.GetCache(),
		Excluded:   o.Excluded,
		Recorder:   mgr.GetEventRecorder("scw-lb-ipam"),
		Metrics:    webhook.NewMetrics(reg),
		Log:        log.WithName("webhook"),
	}
	server := mgr.GetWebhookServer()
	server.Register(WebhookPath, webhook.WithAdmissionDeadline(&admission.Webhook{Handler: mutator}, o.WebhookTimeout))
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the webhook server serves and the Service and Namespace
	// caches have synced: the Service endpoint only then routes the
	// apiserver's calls to this pod, and no admission is decided on an
	// empty cache. The Namespace informer is started here, not on the
	// first admission's read.
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.Namespace{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	if err := mgr.AddReadyzCheck("webhook", server.StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the Service and Namespace caches have not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.Add(alloc); err != nil {
		return err
	}
	if err := reg.Register(newPoolCollector(alloc.Stats)); err != nil {
		return err
	}
	sw := sweeper.New(sweeper.Options{
		Cloud:    cloud,
		Config:   alloc.Config,
		Services: mgr.GetCache(),
		Synced: func() bool {
			// Never act on a partial view: every reservation would look unused.
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return mgr.GetCache().WaitForCacheSync(ctx)
		},
		Interval:            o.Sweep.Interval,
		PendingGrace:        o.Sweep.PendingGrace,
		MaxReleasesPerCycle: o.Sweep.MaxReleases,
		ReportOnly:          o.Sweep.ReportOnly,
		ReleaseRemovedPools: o.Sweep.ReleaseRemovedPools,
		Unreserved:          mutator.Unreserved,
		Claims:              claims,
		Recorder:            mgr.GetEventRecorder("scw-lb-ipam-sweeper"),
		Metrics:             sweeper.NewMetrics(reg),
		Log:                 log.WithName("sweeper"),
	})
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Service{})
	if err != nil {
		return fmt.Errorf("watching Services: %w", err)
	}
	if _, err := informer.AddEventHandler(sw.Handler()); err != nil {
		return fmt.Errorf("watching Services: %w", err)
	}
	var leaderOnly manager.Runnable = manager.RunnableFunc(sw.Start)
	if o.LeaderElect {
		lr, err := newLeaderRunner(restCfg, o.claimsNamespace(), o.Leader, sw.Start, reg, log.WithName("leader"))
		if err != nil {
			return err
		}
		leaderOnly = lr
	}
	if err := mgr.Add(leaderOnly); err != nil {
		return err
	}
	reloader := &configReloader{path: o.ConfigFile, every: o.ConfigPollEvery, cloud: cloud, alloc: alloc,
		policy: o.retention(), gauge: gauge, clock: clock.RealClock{}, log: log.WithName("config")}
	if err := mgr.Add(reloader); err != nil {
		return err
	}
	return nil
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

// claimsNamespace holds the bring-your-own claims: the release namespace.
func (o Options) claimsNamespace() string {
	if o.LeaderElectNS != "" {
		return o.LeaderElectNS
	}
	return "default"
}

var errNoKubeconfig = errors.New("no Kubernetes configuration: run in a cluster, set --kubeconfig or $KUBECONFIG")
