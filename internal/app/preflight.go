package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// PreflightCanaryName is the Service name in the ledger tags of the canary
// bookings of "preflight --write": no Service of that name is ever created,
// so a canary whose release was lost is an orphan the sweeper releases.
const PreflightCanaryName = "scw-lb-ipam-preflight"

// DefaultWebhookConfiguration is the chart's name for the webhook
// configuration of a release named scw-lb-ipam (its fullname).
const DefaultWebhookConfiguration = "scw-lb-ipam"

// PreflightOptions are the flags of "preflight".
type PreflightOptions struct {
	ConfigFile string
	Kubeconfig string
	Output     string // table or json
	// Write books and releases a canary address in each pool.
	Write bool
	// Namespace is the opted-in namespace of the webhook's dry run; empty
	// picks the first opted-in one that is not excluded.
	Namespace            string
	WebhookConfiguration string
	// ReleaseNamespace is where scw-lb-ipam runs: excluded from admission,
	// and the namespace in the canary's ledger tags.
	ReleaseNamespace string
	// Excluded are the namespaces the webhook never touches, the release
	// namespace among them.
	Excluded []string
	// ScalewayOptions add to the SDK environment (tests).
	ScalewayOptions []scw.ClientOption
	// Kube replaces --kubeconfig (tests); Warnings then returns the
	// apiserver warnings Kube received so far.
	Kube     client.Client
	Warnings func() []string
	// Now is the clock of the canary's orphaned-since tag; nil is time.Now.
	Now func() time.Time
}

// ParsePreflightFlags reads the flags of "preflight".
func ParsePreflightFlags(args []string) (PreflightOptions, error) {
	var o PreflightOptions
	var excluded string
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	fs.StringVar(&o.ConfigFile, "config", "/etc/scw-lb-ipam/pools.yaml", "pool file")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (empty: in-cluster, or $KUBECONFIG)")
	fs.StringVar(&o.Output, "o", "table", "output: table or json")
	fs.BoolVar(&o.Write, "write", false, "also book and release at once a canary address in each pool")
	fs.StringVar(&o.Namespace, "namespace", "", "opted-in namespace for the webhook's dry run (default: the first namespace labelled "+request.LabelEnabled+"=true that is not excluded)")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", DefaultWebhookConfiguration, "name of the MutatingWebhookConfiguration (the chart's fullname)")
	fs.StringVar(&o.ReleaseNamespace, "release-namespace", os.Getenv("POD_NAMESPACE"), "namespace scw-lb-ipam runs in (default $POD_NAMESPACE)")
	fs.StringVar(&excluded, "excluded-namespaces", "kube-system", "comma-separated namespaces the webhook never touches, besides the release namespace")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q: preflight takes flags only", fs.Args())
	}
	if o.Output != "table" && o.Output != "json" {
		return o, fmt.Errorf("-o %q: use table or json", o.Output)
	}
	if o.WebhookConfiguration == "" {
		return o, errors.New("--webhook-configuration is empty: give the MutatingWebhookConfiguration's name (kubectl get mutatingwebhookconfigurations)")
	}
	o.Excluded = excludedNamespaces(excluded, o.ReleaseNamespace)
	return o, nil
}

// CheckResult is one line of preflight.
type CheckResult struct {
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	// Skipped checks did not run: what they need failed before.
	Skipped bool `json:"skipped,omitempty"`
	// Info lines say what preflight cannot check, and how to: OK is true,
	// as they fail nothing.
	Info   bool   `json:"info,omitempty"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// preflight runs the checks in order; each records whether it passed, so
// that what depends on a failed one is skipped rather than run blind.
type preflight struct {
	o       PreflightOptions
	results []CheckResult
	passed  map[string]bool
	cfg     *ipam.Config
	cloud   scaleway.Cloud
	kube    client.Client
	kubeErr error
	// webhooks are the names in our webhook configuration: a dry run's
	// failure names the webhook that failed it.
	webhooks []string
	// yielding are the pools found full with this cluster's retained
	// reservations among the holders: healthy, as the oldest yields to a
	// new Service, though the dry run is denied and no canary fits.
	yielding map[string]ipam.PoolStats
}

func (p *preflight) ok(check, detail string) {
	p.results = append(p.results, CheckResult{Check: check, OK: true, Detail: detail})
	p.passed[check] = true
}

func (p *preflight) info(check, detail string) {
	p.results = append(p.results, CheckResult{Check: check, OK: true, Info: true, Detail: detail})
}

func (p *preflight) fail(check, problem, fix string) {
	p.results = append(p.results, CheckResult{Check: check, Detail: problem, Fix: fix})
}

// needs reports whether every check in deps passed; if not, check is
// recorded as skipped, naming the first one that did not.
func (p *preflight) needs(check string, deps ...string) bool {
	for _, d := range deps {
		if !p.passed[d] {
			p.results = append(p.results, CheckResult{Check: check, Skipped: true, Detail: "skipped: " + d + " failed"})
			return false
		}
	}
	return true
}

// Preflight checks an installation (credentials, pool file, networks, IPAM,
// the webhook) and prints one line per check; it returns an error when any
// check failed or was skipped. Without Write it changes nothing anywhere.
func Preflight(ctx context.Context, o PreflightOptions, out io.Writer) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &preflight{o: o, passed: map[string]bool{}, yielding: map[string]ipam.PoolStats{}}
	p.run(ctx)
	if err := p.print(out); err != nil {
		return err
	}
	failed := 0
	for _, r := range p.results {
		if !r.OK {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("preflight: %d of %d checks failed or were skipped", failed, len(p.results))
	}
	return nil
}

const (
	checkCredentials   = "credentials"
	checkPoolFile      = "pool file"
	checkClusterPN     = "cluster network"
	checkWebhookConfig = "webhook configuration"
	checkNamespace     = "opted-in namespace"
	checkDryRun        = "webhook dry run"
	checkBooking       = "booking rights"
	checkLBNetworks    = "Load Balancer networks"
	checkCCM           = "CCM version"
	// parsed is what the checks after the pool file need of it: that it
	// parsed. It passes then, even when the whole file does not resolve:
	// each pool's line says which part does not.
	parsed = checkPoolFile
)

func poolNetworkCheck(pool string) string { return "pool " + pool + " network" }

func poolIPAMCheck(pool string) string { return "pool " + pool + " IPAM" }

func poolCanaryCheck(pool string) string { return "pool " + pool + " canary" }

func poolFullCheck(pool string) string { return "pool " + pool + " full" }

func (p *preflight) run(ctx context.Context) {
	cfg, _, parseErr := loadConfig(p.o.ConfigFile)
	if parseErr == nil {
		p.cfg = cfg
		p.passed[parsed] = true
	}
	p.credentials(ctx)
	p.poolFile(ctx, parseErr)
	if p.cfg != nil {
		p.clusterNetwork(ctx)
		for _, pool := range p.cfg.Pools {
			p.poolNetwork(ctx, pool)
		}
		for _, pool := range p.cfg.Pools {
			p.poolIPAM(ctx, pool)
		}
		if !p.o.Write && p.passed[checkCredentials] {
			p.info(checkBooking, "not checked: listing needs no write right, and without --write preflight books nothing; to check that the key may book, run with --write (helm: tests.preflight.write=true), which books and releases at once a canary address in each pool")
		}
		p.lbNetworks()
	} else {
		p.needs(checkClusterPN, parsed)
	}
	p.webhookConfiguration(ctx)
	pool := p.namespace(ctx)
	p.dryRun(ctx, pool)
	p.info(checkCCM, "not readable from here (on Kapsule the CCM runs in Scaleway's control plane): "+ccm.AnnotationPrivateIPIDs+" needs v0.36.0 or later. An older CCM gives the Load Balancer a DHCP address instead: the convergence monitor then reports reason not_attached (Event IPNotApplied: kubectl get events -A --field-selector reason=IPNotApplied; gauge scw_lb_ipam_services_not_converged{reason=\"not_attached\"})")
}

func (p *preflight) print(out io.Writer) error {
	if p.o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(p.results)
	}
	for _, r := range p.results {
		var err error
		switch {
		case r.Info:
			_, err = fmt.Fprintf(out, "info %s: %s\n", r.Check, r.Detail)
		case r.OK:
			_, err = fmt.Fprintf(out, "ok  %s: %s\n", r.Check, r.Detail)
		case r.Skipped:
			_, err = fmt.Fprintf(out, "skip %s: %s\n", r.Check, r.Detail)
		default:
			_, err = fmt.Fprintf(out, "FAIL %s: %s. %s\n", r.Check, strings.TrimSuffix(r.Detail, "."), capitalize(r.Fix))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
