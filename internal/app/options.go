package app

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/scaleway/scaleway-sdk-go/scw"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/scw-lb-ipam/scw-lb-ipam/certs"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// WebhookPath is where the Service mutator is served; the chart's
// MutatingWebhookConfiguration points here.
const WebhookPath = "/mutate-v1-service"

// Options are the flags of "serve", validated before anything starts: each
// component's own Options, the flags bound straight into them, and what the
// process around them needs. Serve fills in what the components share
// (the Scaleway client, the logger, the metrics, the excluded namespaces).
type Options struct {
	ConfigFile string
	// ConfigPollEvery paces the check of the pool file, and of the API
	// key in KeyDir, for changes.
	ConfigPollEvery time.Duration
	// KeyDir holds the API key as files (the credentials Secret mounted as
	// a volume); a new key there is used without a restart. Empty, or the
	// default and absent: the SDK environment's key, for the life of the
	// process.
	KeyDir      string
	Kubeconfig  string
	MetricsAddr string
	// MetricsSecure serves the metrics over HTTPS, to callers the apiserver
	// authenticates (TokenReview) and authorizes (SubjectAccessReview, get
	// on the non-resource URL /metrics); false serves plain HTTP to anyone.
	MetricsSecure bool
	// EnableHTTP2 lets the webhook and metrics servers negotiate HTTP/2;
	// off, they serve HTTP/1.1 only (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
	ProbeAddr   string
	// ShutdownDelay is how long a stopping process keeps serving the
	// webhook after its readiness failed (see Start).
	ShutdownDelay time.Duration
	// SelfManagedTLS: the certs package keeps a CA and certificate in a
	// Secret and patches the caBundle (Certs). Otherwise (cert-manager) the
	// files in Server.CertDir are provided and the caBundle injected by
	// someone else.
	SelfManagedTLS bool
	Zap            zap.Options

	// Server is the webhook server: --webhook-host, --webhook-port and
	// --cert-dir (which the metrics server and Certs share).
	Server crwebhook.Options
	// Webhook is the Service mutator: --webhook-timeout (the admission
	// deadline; the reuse safety margin is twice it), and the excluded
	// namespaces, which the sweeper shares.
	Webhook webhook.Options
	// Inventory is what each replica knows of the pools: --occupancy-ttl
	// and --index-refresh-interval.
	Inventory inventory.Options
	// Sweep is the sweeper: its cycle, retention and report flags.
	Sweep sweeper.Options
	// View: the sweeper's leader shows the reservations, the pools and
	// the Services' conditions in the apiserver (--view).
	View bool
	// Leader is the sweeper's election: --leader-elect, its namespace and
	// timings.
	Leader sweeper.Election
	// Certs are the self-managed certificates: --tls-secret,
	// --webhook-service and --webhook-config.
	Certs certs.Options

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

// ParseFlags reads the flags of "serve" and the pod's namespace
// (POD_NAMESPACE), then validates them.
func ParseFlags(args []string) (Options, error) {
	o := Options{Zap: zap.Options{}, Webhook: webhook.Options{Path: WebhookPath}}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	excluded, tlsMode := o.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if err := o.complete(*excluded, *tlsMode, os.Getenv("POD_NAMESPACE")); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// bindFlags binds the flags to o; the two it returns need complete.
func (o *Options) bindFlags(fs *flag.FlagSet) (excluded, tlsMode *string) {
	fs.StringVar(&o.ConfigFile, "config", "/etc/scw-lb-ipam/pools.yaml", "pool file; reloaded when it changes (a bad file keeps the last good one)")
	fs.StringVar(&o.Server.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding tls.crt and tls.key, reloaded when they change")
	fs.StringVar(&o.Server.Host, "webhook-host", "", "address the webhook server listens on (empty: all)")
	fs.IntVar(&o.Server.Port, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint (0 disables it)")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "serve the metrics over HTTPS to callers the apiserver authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone who reaches the port")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", false, "let the webhook and metrics servers negotiate HTTP/2; off by default (HTTP/2 Rapid Reset and stream cancellation, CVE-2023-44487 and CVE-2023-39325)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	excluded = fs.String("excluded-namespaces", "kube-system", "comma-separated namespaces never touched, in addition to kube-system and the release namespace (always)")
	fs.BoolVar(&o.Leader.Enabled, "leader-elect", true, "elect a leader for the sweeper (the webhook runs on every replica)")
	fs.StringVar(&o.Leader.Namespace, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's namespace)")
	fs.DurationVar(&o.Leader.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lost leader's lease blocks the others")
	fs.DurationVar(&o.Leader.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives the sweeper up (the webhook keeps serving)")
	fs.DurationVar(&o.Leader.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "time between campaign and renew attempts")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, or $KUBECONFIG)")
	fs.DurationVar(&o.Inventory.OccupancyTTL, "occupancy-ttl", 5*time.Minute, "how long a listing of a subnet's booked addresses and of this cluster's reservations is trusted; past it, admissions list by themselves (an extra Scaleway call each)")
	fs.DurationVar(&o.Inventory.RefreshInterval, "index-refresh-interval", time.Minute, "how often each replica lists the pools' subnets in the background (ceil(addresses/100) calls per subnet): the reservation index that lets a CREATE book in one call, and the pool gauges; must be shorter than --occupancy-ttl")
	fs.DurationVar(&o.ConfigPollEvery, "config-poll-interval", 10*time.Second, "how often the pool file and the API key in --scaleway-key-dir are checked for changes")
	fs.StringVar(&o.KeyDir, "scaleway-key-dir", DefaultKeyDir, keyDirUsage)
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long the webhook keeps serving once /readyz fails, so that the apiserver stops calling this pod before it stops listening (keep it under the pod's terminationGracePeriodSeconds)")
	fs.DurationVar(&o.Webhook.Timeout, "webhook-timeout", webhook.DefaultAdmissionTimeout, "the webhook configuration's timeoutSeconds; admissions answer within it, and a retained IP is taken back only while its release is more than twice this away")
	fs.DurationVar(&o.Sweep.Interval, "sweep-interval", sweeper.DefaultInterval, "time between sweeper cycles (Service deletions trigger one sooner)")
	fs.DurationVar(&o.Sweep.PendingGrace, "pending-grace", sweeper.DefaultPendingGrace, "retention of a reservation whose Service was never created")
	fs.IntVar(&o.Sweep.MaxReleasesPerCycle, "max-releases-per-cycle", sweeper.DefaultMaxReleases, "most reservations one sweeper cycle releases")
	fs.BoolVar(&o.Sweep.ReportOnly, "sweep-report-only", false, "log and count what the sweeper would release, release nothing")
	fs.BoolVar(&o.Sweep.ReleaseRemovedPools, "release-removed-pools", false, "let the sweeper release reservations of pools no longer in the pool file")
	fs.BoolVar(&o.View, "view", true, "show the reservations and pools as IPReservation and IPPool objects (scw-lb-ipam.io) and the Services' Reserved and Applied conditions; needs the chart's CustomResourceDefinitions")
	fs.DurationVar(&o.Sweep.ConvergenceGrace, "convergence-grace", sweeper.DefaultConvergenceGrace, "how long a LoadBalancer Service's reserved IPs may take to show on its Load Balancer before the sweeper reports it (IPNotApplied Event, scw_lb_ipam_services_not_converged)")
	tlsMode = fs.String("tls-mode", "self-managed", "who provides the serving certificate: self-managed (a Secret kept by scw-lb-ipam) or cert-manager (files mounted in --cert-dir)")
	fs.StringVar(&o.Certs.SecretName, "tls-secret", "scw-lb-ipam-tls", "self-managed mode: the Secret holding the CA and serving certificate")
	fs.StringVar(&o.Certs.ServiceName, "webhook-service", "scw-lb-ipam", "self-managed mode: the webhook's Service, whose DNS names the certificate covers")
	fs.StringVar(&o.Certs.WebhookConfigName, "webhook-config", "scw-lb-ipam", "self-managed mode: the MutatingWebhookConfiguration whose caBundle is kept")
	o.Zap.BindFlags(fs)
	return excluded, tlsMode
}

// excludedNamespaces are the namespaces of --excluded-namespaces (comma
// separated), kube-system and the release namespace podNS, which are
// always excluded: the webhook must never be needed to admit itself or the
// cluster's own add-ons, whatever the flag says.
func excludedNamespaces(flag, podNS string) []string {
	out := []string{metav1.NamespaceSystem}
	for _, ns := range append(strings.Split(flag, ","), podNS) {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// complete fills in what the flags imply: the excluded namespaces, the
// release namespace podNS, and the TLS mode.
func (o *Options) complete(excluded, tlsMode, podNS string) error {
	o.Webhook.Excluded = excludedNamespaces(excluded, podNS)
	if podNS != "" && o.Leader.Namespace == "" {
		o.Leader.Namespace = podNS
	}
	switch tlsMode {
	case "self-managed":
		o.SelfManagedTLS = true
		o.Certs.Namespace = podNS
		if o.Certs.Namespace == "" {
			return fmt.Errorf("--tls-mode self-managed keeps its Secret in the pod's namespace: set POD_NAMESPACE (the chart does)")
		}
	case "cert-manager":
	default:
		return fmt.Errorf("--tls-mode %q: use self-managed or cert-manager", tlsMode)
	}
	return nil
}

// Validate refuses options that cannot work together, naming the flags.
func (o Options) Validate() error {
	if o.Server.Port <= 0 || o.Server.Port > 65535 {
		return fmt.Errorf("--webhook-port %d is not a port", o.Server.Port)
	}
	if o.Sweep.Interval < time.Second || o.Sweep.PendingGrace < time.Second || o.Sweep.MaxReleasesPerCycle < 1 {
		return fmt.Errorf("--sweep-interval and --pending-grace must be at least 1s and --max-releases-per-cycle at least 1")
	}
	if o.Sweep.ConvergenceGrace <= 0 {
		return fmt.Errorf("--convergence-grace %s must be more than 0: it is how long the CCM may take to apply a Service's reserved IPs before the Service is reported (default %s; the CCM usually needs a minute or two)", o.Sweep.ConvergenceGrace, sweeper.DefaultConvergenceGrace)
	}
	if t := o.Webhook.Timeout; t < time.Second || t > 30*time.Second {
		return fmt.Errorf("--webhook-timeout %s: the apiserver allows 1s to 30s; pass the webhook configuration's timeoutSeconds", t)
	}
	if m := o.margin(); o.Sweep.PendingGrace <= m {
		return fmt.Errorf("--pending-grace %s is not longer than the reuse safety margin %s (twice --webhook-timeout), so a pending reservation could never be taken back; use more than %s", o.Sweep.PendingGrace, m, m)
	}
	if l := o.Leader; l.RetryPeriod <= 0 || l.RenewDeadline <= l.RetryPeriod || l.LeaseDuration <= l.RenewDeadline {
		return fmt.Errorf("leader election timings: need --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0", l.LeaseDuration, l.RenewDeadline, l.RetryPeriod)
	}
	if i := o.Inventory; i.OccupancyTTL < time.Second {
		return fmt.Errorf("--occupancy-ttl %s is too short; use a minute or more", i.OccupancyTTL)
	} else if i.RefreshInterval < time.Second || i.RefreshInterval >= i.OccupancyTTL {
		return fmt.Errorf("--index-refresh-interval %s must be at least 1s and shorter than --occupancy-ttl %s, so that a failed listing is retried before admissions stop trusting the last one", i.RefreshInterval, i.OccupancyTTL)
	}
	return nil
}

// margin is the release protocol's safety margin: twice the admission
// deadline (see ipam.Retention).
func (o Options) margin() time.Duration { return 2 * o.Webhook.Timeout }

// retention is the release protocol the allocator and the sweeper share.
func (o Options) retention() ipam.Retention {
	return ipam.Retention{PendingGrace: o.Sweep.PendingGrace, Margin: o.margin(), SweepInterval: o.Sweep.Interval}
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
	s := o.Server
	s.TLSOpts = append(s.TLSOpts[:len(s.TLSOpts):len(s.TLSOpts)], o.tlsOpts()...)
	return s
}

// metricsServerOptions configure the metrics endpoint. Secure, it serves
// the webhook's own certificate (CertDir: the Service's DNS names, signed by
// the webhook's CA), so a scraper can verify it, and lets through only
// callers the apiserver authenticates and authorizes for get on /metrics.
func (o Options) metricsServerOptions() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr, TLSOpts: o.tlsOpts()}
	if o.MetricsSecure {
		m.SecureServing = true
		m.CertDir = o.Server.CertDir
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

// claimsNamespace holds the bring-your-own claims: the release namespace.
func (o Options) claimsNamespace() string {
	if o.Leader.Namespace != "" {
		return o.Leader.Namespace
	}
	return "default"
}
