package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
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
	p := &preflight{o: o, passed: map[string]bool{}}
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
func poolIPAMCheck(pool string) string    { return "pool " + pool + " IPAM" }
func poolCanaryCheck(pool string) string  { return "pool " + pool + " canary" }

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

// maxLBNetworks is how many Private Networks one Scaleway Load Balancer
// attaches at most.
const maxLBNetworks = 8

// lbNetworks counts the Private Networks a Service's Load Balancer may need
// with the pools one namespace may combine: the nodes' network and each
// pool's. The webhook denies a Service over the limit; this says so before
// any Service asks. Namespace globs are tried on the names the pool file
// gives, plus a namespace it does not name (the unrestricted pools).
func (p *preflight) lbNetworks() {
	candidates := []string{""}
	for _, pool := range p.cfg.Pools {
		candidates = append(candidates, pool.Namespaces...)
	}
	var worst []string
	var worstNS string
	for _, ns := range candidates {
		pns := []string{p.cfg.ClusterPrivateNetworkID}
		for _, pool := range p.cfg.Pools {
			if pool.Disabled || (ns == "" && len(pool.Namespaces) > 0) || (ns != "" && !pool.Allows(ns)) {
				continue
			}
			if !slices.Contains(pns, pool.PrivateNetworkID) {
				pns = append(pns, pool.PrivateNetworkID)
			}
		}
		if len(pns) > len(worst) {
			worst, worstNS = pns, ns
		}
	}
	who := "a Service asking every pool"
	if worstNS != "" {
		who = "a Service of namespace " + worstNS + " asking every pool it may use"
	}
	if len(worst) > maxLBNetworks {
		p.fail(checkLBNetworks, fmt.Sprintf("%s needs %d Private Networks (the nodes' and the pools': %s), and a Load Balancer attaches at most %d: the webhook denies such a Service", who, len(worst), strings.Join(worst, ", "), maxLBNetworks),
			"put pools that one Service combines on shared Private Networks, or restrict pools to namespaces (namespaces in the pool file) so that no namespace may use pools on more than 7 networks besides the nodes'")
		return
	}
	p.ok(checkLBNetworks, fmt.Sprintf("%s needs %d of a Load Balancer's %d Private Networks (the nodes' and the pools'), leaving %d for %s", who, len(worst), maxLBNetworks, maxLBNetworks-len(worst), ccm.AnnotationPNIDs))
}

func (p *preflight) credentials(ctx context.Context) {
	region := os.Getenv("SCW_DEFAULT_REGION")
	if p.cfg != nil {
		region = p.cfg.Region
	}
	if region == "" {
		region = string(scw.RegionFrPar)
	}
	who := "the API key"
	if ak := os.Getenv("SCW_ACCESS_KEY"); ak != "" {
		who += " " + ak // the access key names the key; the secret key is never shown
	}
	grant := func(project string) string {
		return "give the key's IAM application a policy on Project " + project + " with the permission sets IPAMFullAccess and PrivateNetworksReadOnly (README, Install on Kapsule, step 3)"
	}
	const create = "create an IAM application with the permission sets IPAMFullAccess and PrivateNetworksReadOnly on the cluster's Project, an API key for it, and the Secret the chart reads (README, Install on Kapsule, step 3)"
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: region, ClientOptions: p.o.ScalewayOptions})
	if err != nil {
		p.fail(checkCredentials, err.Error(), "set SCW_ACCESS_KEY, SCW_SECRET_KEY and SCW_DEFAULT_PROJECT_ID: "+create)
		return
	}
	project := cloud.ProjectID()
	// A list scoped to the Project: IAM answers for the key's rights there,
	// not just anywhere (a key of another Project's application would pass
	// an unscoped read). The tag matches nothing, so one page answers.
	_, err = cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: project, Tags: []string{preflightProbeTag}})
	switch rejected, denied := authFailure(err); {
	case err == nil:
	case rejected:
		p.fail(checkCredentials, fmt.Sprintf("Scaleway rejects %s (%v): the key does not exist, is revoked or expired, or the secret key does not match it", who, err),
			"put the access and secret key of an existing API key in the Secret (scw iam api-key get <access key> shows whether it exists and its expiry), or "+create)
		return
	case denied && project != "":
		p.fail(checkCredentials, fmt.Sprintf("%s authenticates but may not list IPAM in Project %s (%v): its IAM application lacks IPAMFullAccess there", who, project, err), grant(project))
		return
	case denied:
		p.fail(checkCredentials, fmt.Sprintf("%s authenticates but may not list IPAM (%v)", who, err), create)
		return
	default:
		p.fail(checkCredentials, fmt.Sprintf("reading IPAM in region %s: %v", region, err), "check SCW_API_URL, the network path to api.scaleway.com and status.scaleway.com, then run again")
		return
	}
	if project == "" {
		p.fail(checkCredentials, who+" authenticates but SCW_DEFAULT_PROJECT_ID is not set: bookings would land in the key's default Project, which need not be the networks'", "add SCW_DEFAULT_PROJECT_ID (the cluster's Project) to the Secret")
		return
	}
	p.cloud = &pnCache{Cloud: cloud, read: map[string]pnRead{}}
	p.ok(checkCredentials, fmt.Sprintf("%s authenticates in region %s and may list IPAM in Project %s", who, region, project))
}

// preflightProbeTag is a tag no IP carries: the credentials' list is then
// one empty page, whatever the Project holds.
const preflightProbeTag = "scw-lb-ipam-preflight-probe"

// authFailure tells a key Scaleway does not know (401
// denied_authentication: fix the key) from a known key without the rights
// (403 permissions_denied or authorization_required: fix its IAM policy).
// Classify puts both in KindPermissionDenied, as the webhook needs no more.
func authFailure(err error) (rejected, denied bool) {
	if err == nil {
		return false, false
	}
	var unauth *scw.DeniedAuthenticationError
	var perm *scw.PermissionsDeniedError
	var resp *scw.ResponseError
	switch {
	case errors.As(err, &unauth):
		return true, false
	case errors.As(err, &perm):
		return false, true
	case errors.As(err, &resp):
		return resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden
	}
	return false, false
}

// pnCache reads each Private Network once: the pool file's Resolve, the
// cluster network's line and each pool's line all need it, and one run
// should judge one answer.
type pnCache struct {
	scaleway.Cloud
	mu   sync.Mutex
	read map[string]pnRead
}

type pnRead struct {
	pn  *scaleway.PrivateNetwork
	err error
}

func (c *pnCache) GetPrivateNetwork(ctx context.Context, id string) (*scaleway.PrivateNetwork, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.read[id]; ok {
		return r.pn, r.err
	}
	pn, err := c.Cloud.GetPrivateNetwork(ctx, id)
	c.read[id] = pnRead{pn, err}
	return pn, err
}

func (p *preflight) poolFile(ctx context.Context, parseErr error) {
	const fix = "correct the pool file (the chart's config values) and run again"
	if parseErr != nil {
		p.fail(checkPoolFile, parseErr.Error(), fix)
		return
	}
	names := make([]string, len(p.cfg.Pools))
	for i, pool := range p.cfg.Pools {
		names[i] = pool.Name
	}
	if !p.passed[checkCredentials] {
		p.results = append(p.results, CheckResult{Check: checkPoolFile, Skipped: true,
			Detail: fmt.Sprintf("skipped: credentials failed (the file parses: pools %s; its networks are not checked)", strings.Join(names, ", "))})
		return
	}
	// The whole file, for what spans pools; each pool's own line follows,
	// whatever this verdict.
	if err := p.cfg.Resolve(ctx, p.cloud); err != nil {
		p.fail(checkPoolFile, err.Error(), fix)
		return
	}
	p.ok(checkPoolFile, fmt.Sprintf("%s: cluster %s, region %s, pools %s", p.o.ConfigFile, p.cfg.ClusterName, p.cfg.Region, strings.Join(names, ", ")))
}

func (p *preflight) clusterNetwork(ctx context.Context) {
	if !p.needs(checkClusterPN, checkCredentials) {
		return
	}
	id := p.cfg.ClusterPrivateNetworkID
	pn, err := p.cloud.GetPrivateNetwork(ctx, id)
	switch {
	case err == nil:
		p.ok(checkClusterPN, fmt.Sprintf("Private Network %s (%s) exists", id, pn.Name))
	case scaleway.Classify(err) == scaleway.KindNotFound:
		p.fail(checkClusterPN, fmt.Sprintf("clusterPrivateNetworkID %s: no such Private Network in region %s", id, p.cfg.Region),
			"set clusterPrivateNetworkID to the nodes' Private Network: scw k8s cluster get <cluster-id> shows it as private_network_id")
	default:
		p.fail(checkClusterPN, fmt.Sprintf("clusterPrivateNetworkID %s: %v", id, err), "check that the API key has PrivateNetworksReadOnly on the cluster's Project")
	}
}

func (p *preflight) poolNetwork(ctx context.Context, pool *ipam.Pool) {
	check := poolNetworkCheck(pool.Name)
	if !p.needs(check, checkCredentials) {
		return
	}
	if err := p.cfg.ResolvePool(ctx, p.cloud, pool.Name); err != nil {
		p.fail(check, err.Error(), p.poolNetworkFix(ctx, pool))
		return
	}
	p.ok(check, fmt.Sprintf("Private Network %s is in Project %s and holds subnet %s", pool.PrivateNetworkID, p.cloud.ProjectID(), pool.Prefix()))
}

// poolNetworkFix says what to change for the way pool's network failed:
// ResolvePool's message says what is wrong, not which value to fix.
func (p *preflight) poolNetworkFix(ctx context.Context, pool *ipam.Pool) string {
	project := p.cloud.ProjectID()
	const show = " (scw vpc private-network get <id> lists its Project and subnets)"
	pn, err := p.cloud.GetPrivateNetwork(ctx, pool.PrivateNetworkID) // read once: cached
	switch kind := scaleway.Classify(err); {
	case err == nil:
	case kind == scaleway.KindNotFound:
		return fmt.Sprintf("set the pool's privateNetworkID to a Private Network of region %s and Project %s (scw vpc private-network list project-id=%s region=%s)", p.cfg.Region, project, project, p.cfg.Region)
	case kind == scaleway.KindPermissionDenied:
		return "give the key's IAM application PrivateNetworksReadOnly on the network's Project (README, Install on Kapsule, step 3)"
	default:
		return "check the network path to the Scaleway API, then run again"
	}
	switch {
	case pn.ProjectID != "" && pn.ProjectID != project:
		return fmt.Sprintf("IPAM books only in a network's own Project: move the pool to a Private Network of Project %s, or run the release with an API key and SCW_DEFAULT_PROJECT_ID of Project %s (every pool's network must then be there)", project, pn.ProjectID)
	case slices.ContainsFunc(pn.Subnets, func(s scaleway.Subnet) bool { return s.Prefix == pool.Prefix() }):
		// The subnet matched: what failed is inside it.
		return fmt.Sprintf("correct the pool's ranges so that they lie inside subnet %s (and leave free addresses)", pool.Prefix())
	default:
		return "name in the pool's subnet one of the network's subnets (the line lists them), or add that subnet to the network" + show
	}
}

func (p *preflight) poolIPAM(ctx context.Context, pool *ipam.Pool) {
	check := poolIPAMCheck(pool.Name)
	if !p.needs(check, poolNetworkCheck(pool.Name)) {
		return
	}
	ips, err := p.cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: pool.PrivateNetworkID})
	if err != nil {
		fix := "check the network path to the Scaleway API and status.scaleway.com, then run again"
		if scaleway.Classify(err) == scaleway.KindPermissionDenied {
			fix = "give the key's IAM application IPAMFullAccess on Project " + p.cloud.ProjectID() + " (README, Install on Kapsule, step 3)"
		}
		p.fail(check, fmt.Sprintf("listing the IPs of Private Network %s: %v", pool.PrivateNetworkID, err), fix)
		return
	}
	used := map[netip.Addr]bool{}
	for _, ip := range ips {
		if pool.Prefix().Contains(ip.Address) {
			used[ip.Address] = true
		}
	}
	p.ok(check, fmt.Sprintf("%d addresses booked in %s", len(used), pool.Prefix()))
	if p.o.Write {
		p.canary(ctx, pool, used)
	}
}

// canary books an address in pool and releases it at once. It carries the
// ledger's tags, orphaned since now: if the release is lost, the sweeper
// takes it for this cluster's orphan and releases it after the retention.
func (p *preflight) canary(ctx context.Context, pool *ipam.Pool, used map[netip.Addr]bool) {
	check := poolCanaryCheck(pool.Name)
	entry := ipam.Entry{
		Cluster:       p.cfg.ClusterName,
		Pool:          pool.Name,
		Service:       types.NamespacedName{Namespace: p.releaseNamespace(), Name: PreflightCanaryName},
		OrphanedSince: p.o.Now(),
	}
	req := scaleway.BookRequest{PrivateNetworkID: pool.PrivateNetworkID, IPv6: pool.IPFamily == ipam.IPv6, Tags: entry.Tags()}
	if pool.PicksAddresses() {
		// IPAM would choose anywhere in the subnet: pick inside the ranges.
		space, err := pool.NewSpace()
		if err != nil {
			p.fail(check, fmt.Sprintf("pool %s's address space: %v", pool.Name, err), "correct the pool's ranges")
			return
		}
		for a := range used {
			if space.Contains(a) {
				space.Mark(a)
			}
		}
		if req.Address, err = space.Pick(); err != nil {
			p.fail(check, fmt.Sprintf("pool %s has no free address to book a canary in (%d/%d used)", pool.Name, space.Used(), space.Size()), "free addresses or widen the pool's ranges")
			return
		}
	}
	ip, err := p.cloud.BookIP(ctx, req)
	if err != nil {
		p.fail(check, fmt.Sprintf("booking a canary address in pool %s: %v", pool.Name, err), p.canaryFix(err, req.Address))
		return
	}
	if err := p.cloud.ReleaseIP(ctx, ip.ID); err != nil && scaleway.Classify(err) != scaleway.KindNotFound {
		p.fail(check, fmt.Sprintf("booked %s (IPAM ID %s) but releasing it failed: %v", ip.Address, ip.ID, err),
			fmt.Sprintf("nothing to do: it is tagged as this cluster's orphan of a Service never created, so the sweeper releases it once its pending grace is over (sweeper.pendingGrace, 10m by default); or now: scw ipam ip delete %s region=%s", ip.ID, p.cfg.Region))
		return
	}
	p.ok(check, fmt.Sprintf("booked %s (IPAM ID %s) and released it", ip.Address, ip.ID))
}

// canaryFix says what a failed canary booking means: only a refusal is
// about rights.
func (p *preflight) canaryFix(err error, address netip.Addr) string {
	switch scaleway.Classify(err) {
	case scaleway.KindAddressTaken:
		what := "the address IPAM chose"
		if address.IsValid() {
			what = address.String()
		}
		return what + " was taken between the listing and the booking (another booking in the subnet, e.g. a Service being created): nothing is wrong with the rights; run again"
	case scaleway.KindExhausted:
		return "the subnet has no free address: release addresses in it or widen the pool"
	case scaleway.KindPermissionDenied:
		return "give the key's IAM application IPAMFullAccess on Project " + p.cloud.ProjectID() + ": it may list but not book (README, Install on Kapsule, step 3)"
	case scaleway.KindUnavailable:
		return "check the network path to the Scaleway API and status.scaleway.com, then run again"
	}
	return "read Scaleway's message above, correct the pool and run again"
}

func (p *preflight) releaseNamespace() string {
	if p.o.ReleaseNamespace != "" {
		return p.o.ReleaseNamespace
	}
	return "default"
}

// kubeClient returns the cluster's client, built once; its warnings are
// collected, since the webhook answers a dry run with a warning only.
func (p *preflight) kubeClient() (client.Client, error) {
	if p.kube != nil || p.kubeErr != nil {
		return p.kube, p.kubeErr
	}
	if p.o.Kube != nil {
		p.kube = p.o.Kube
		return p.kube, nil
	}
	rc, err := restConfig(p.o.Kubeconfig)
	if err != nil {
		p.kubeErr = err
		return nil, err
	}
	w := &warningList{}
	rc.WarningHandler = w
	p.o.Warnings = w.list
	p.kube, p.kubeErr = client.New(rc, client.Options{})
	return p.kube, p.kubeErr
}

// warningList keeps the apiserver's warnings (admission warnings among them).
type warningList struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningList) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warningList) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

func (p *preflight) webhookConfiguration(ctx context.Context) {
	name := p.o.WebhookConfiguration
	kube, err := p.kubeClient()
	if err != nil {
		p.fail(checkWebhookConfig, err.Error(), "run preflight in the cluster (helm test <release>) or pass --kubeconfig")
		return
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &mwc); err != nil {
		if apierrors.IsNotFound(err) {
			p.fail(checkWebhookConfig, fmt.Sprintf("MutatingWebhookConfiguration %s does not exist", name),
				"install the chart, or pass --webhook-configuration with the name the chart gave it (its fullname: kubectl get mutatingwebhookconfigurations)")
			return
		}
		p.fail(checkWebhookConfig, fmt.Sprintf("reading MutatingWebhookConfiguration %s: %v", name, err), "allow get on it to the account preflight runs as (the chart's test RBAC does)")
		return
	}
	if len(mwc.Webhooks) == 0 {
		p.fail(checkWebhookConfig, fmt.Sprintf("MutatingWebhookConfiguration %s has no webhooks", name), "re-install the chart (helm upgrade --install)")
		return
	}
	var certs int
	var expires time.Time
	for _, wh := range mwc.Webhooks {
		p.webhooks = append(p.webhooks, wh.Name)
		if len(wh.ClientConfig.CABundle) == 0 {
			p.fail(checkWebhookConfig, fmt.Sprintf("webhook %s of %s has no caBundle: the apiserver cannot trust the webhook's certificate", wh.Name, name),
				"with tls.mode cert-manager, check cert-manager's cainjector and the Certificate (kubectl get certificate -n <release namespace>); with self-managed, the pods set it once running: check their logs")
			return
		}
		parsed, err := certutil.ParseCertsPEM(wh.ClientConfig.CABundle)
		if err != nil {
			p.fail(checkWebhookConfig, fmt.Sprintf("webhook %s of %s: the caBundle is not PEM certificates (%v)", wh.Name, name, err),
				"remove the caBundle so that cert-manager or the pods set it again: kubectl patch mutatingwebhookconfiguration "+name+" --type=json -p '[{\"op\":\"remove\",\"path\":\"/webhooks/0/clientConfig/caBundle\"}]'")
			return
		}
		certs += len(parsed)
		for _, c := range parsed {
			if expires.IsZero() || c.NotAfter.Before(expires) {
				expires = c.NotAfter
			}
		}
	}
	p.ok(checkWebhookConfig, fmt.Sprintf("%s: %d webhook(s), caBundle of %d certificate(s), first expiry %s", name, len(mwc.Webhooks), certs, expires.UTC().Format(time.RFC3339)))
}

// namespace finds the opted-in namespace of the dry run and a pool it may
// use by name.
func (p *preflight) namespace(ctx context.Context) *ipam.Pool {
	if !p.needs(checkNamespace, parsed) {
		return nil
	}
	kube, err := p.kubeClient()
	if err != nil {
		// The webhook configuration's line already says why.
		p.needs(checkNamespace, checkWebhookConfig)
		return nil
	}
	excluded := p.o.Excluded
	usable := func(ns string) *ipam.Pool {
		for _, pool := range p.cfg.AllowedPools(ns) {
			if !pool.Disabled && pool.AutoAssigns() {
				return pool
			}
		}
		return nil
	}
	const label = request.LabelEnabled + "=true"
	if ns := p.o.Namespace; ns != "" {
		var obj corev1.Namespace
		if err := kube.Get(ctx, client.ObjectKey{Name: ns}, &obj); err != nil {
			p.fail(checkNamespace, fmt.Sprintf("--namespace %s: %v", ns, err), "name an existing namespace, or omit --namespace to take the first opted-in one")
			return nil
		}
		switch {
		case obj.Labels[request.LabelEnabled] != "true":
			p.fail(checkNamespace, fmt.Sprintf("namespace %s is not opted in (no label %s)", ns, label), "kubectl label namespace "+ns+" "+label)
		case slices.Contains(excluded, ns):
			p.fail(checkNamespace, fmt.Sprintf("namespace %s is excluded (%s): the webhook never sees it", ns, strings.Join(excluded, ", ")), "name an opted-in namespace of your workloads")
		case usable(ns) == nil:
			p.fail(checkNamespace, fmt.Sprintf("namespace %s may use no pool by name (enabled, autoAssign)", ns), "add it to a pool's namespaces in the pool file")
		default:
			pool := usable(ns)
			p.ok(checkNamespace, fmt.Sprintf("%s, which may use pool %s", ns, pool.Name))
			return pool
		}
		return nil
	}
	var list corev1.NamespaceList
	if err := kube.List(ctx, &list, client.MatchingLabels{request.LabelEnabled: "true"}); err != nil {
		p.fail(checkNamespace, fmt.Sprintf("listing the namespaces labelled %s: %v", label, err), "allow list on namespaces to the account preflight runs as (the chart's ClusterRole does), or pass --namespace")
		return nil
	}
	var names, noPool []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	for _, ns := range names {
		if slices.Contains(excluded, ns) {
			continue
		}
		if pool := usable(ns); pool != nil {
			p.o.Namespace = ns
			p.ok(checkNamespace, fmt.Sprintf("%s (labelled %s), which may use pool %s", ns, label, pool.Name))
			return pool
		}
		noPool = append(noPool, ns)
	}
	if len(noPool) > 0 {
		p.fail(checkNamespace, fmt.Sprintf("the opted-in namespaces (%s) may use no pool by name", strings.Join(noPool, ", ")), "add one of them to a pool's namespaces in the pool file, or pass --namespace")
		return nil
	}
	p.fail(checkNamespace, "no namespace is opted in: the webhook ignores every Service", "label the namespaces of your LoadBalancer Services: kubectl label namespace <namespace> "+label)
	return nil
}

// dryRun creates a LoadBalancer Service server-side with dryRun: the
// webhook books nothing and answers with a warning saying what it would
// reserve. No warning means it was not called, e.g. failurePolicy Ignore
// while it is down.
func (p *preflight) dryRun(ctx context.Context, pool *ipam.Pool) {
	if !p.needs(checkDryRun, checkWebhookConfig, checkNamespace) {
		return
	}
	kube, _ := p.kubeClient()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	// A name of its own, not generateName: the webhook needs the name for
	// sticky identity and denies Services without one.
	name := PreflightCanaryName + "-" + hex.EncodeToString(suffix)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.o.Namespace, Name: name, Annotations: map[string]string{
			request.AnnotationPool: pool.Name,
			ccm.AnnotationPrivate:  "true",
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "probe", Port: 80}}},
	}
	var before int
	if p.o.Warnings != nil {
		before = len(p.o.Warnings())
	}
	err := kube.Create(ctx, svc, client.DryRunAll)
	var warnings []string
	if p.o.Warnings != nil {
		warnings = p.o.Warnings()[before:]
	}
	where := fmt.Sprintf("a dry-run create of LoadBalancer Service %s/%s (pool %s)", p.o.Namespace, name, pool.Name)
	if err != nil {
		problem, fix := p.dryRunFailure(err)
		p.fail(checkDryRun, where+": "+problem, fix)
		return
	}
	for _, w := range warnings {
		if strings.HasPrefix(w, "scw-lb-ipam: dry run:") {
			p.ok(checkDryRun, fmt.Sprintf("the webhook answered %s in %s: %q", name, p.o.Namespace, w))
			return
		}
	}
	p.fail(checkDryRun, fmt.Sprintf("%s was admitted without the webhook's warning: the webhook did not answer (failurePolicy Ignore lets Services through while it is down) or does not select namespace %s", where, p.o.Namespace),
		"check the webhook's pods and logs, and the namespaceSelector of MutatingWebhookConfiguration "+p.o.WebhookConfiguration)
}

// quotaExceeded is the ResourceQuota admission plugin's denial.
var quotaExceeded = regexp.MustCompile(`exceeded quota: ([^,]+)`)

// webhookNamed finds the webhook an admission error names, as in
// `failed calling webhook "x"` and `admission webhook "x" denied`.
var webhookNamed = regexp.MustCompile(`(failed calling webhook|admission webhook) "([^"]+)"`)

// dryRunFailure says who refused the dry run, from the apiserver's error:
// our webhook, another webhook or policy, a ResourceQuota, or RBAC.
func (p *preflight) dryRunFailure(err error) (problem, fix string) {
	msg := err.Error()
	if m := webhookNamed.FindStringSubmatch(msg); m != nil {
		ours := slices.Contains(p.webhooks, m[2])
		switch {
		case ours && m[1] == "failed calling webhook":
			return "the apiserver could not call the webhook: " + msg,
				"check the webhook's pods (kubectl -n <release namespace> get pods,endpoints), that the apiserver reaches them on the webhook port, and that the caBundle signs their certificate"
		case ours:
			return "the webhook answered and denied it: " + msg, "follow the denial's own fix (README, Troubleshooting)"
		case m[1] == "failed calling webhook":
			return fmt.Sprintf("webhook %s, not scw-lb-ipam's, could not be called: %s", m[2], msg),
				fmt.Sprintf("that webhook fails LoadBalancer Services in namespace %s too: check it (kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations), or pass --namespace (helm: tests.preflight.namespace) of a namespace it does not select", p.o.Namespace)
		default:
			return fmt.Sprintf("webhook %s, not scw-lb-ipam's, denied it: %s", m[2], msg),
				fmt.Sprintf("that webhook's policy refuses a LoadBalancer Service with annotations %s and %s in namespace %s: ask its owner, or pass --namespace (helm: tests.preflight.namespace) of a namespace it allows", request.AnnotationPool, ccm.AnnotationPrivate, p.o.Namespace)
		}
	}
	if m := quotaExceeded.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("ResourceQuota %s of namespace %s refuses it (a dry run is counted as a create): %s", m[1], p.o.Namespace, msg),
			fmt.Sprintf("raise the quota's services.loadbalancers (kubectl -n %s describe resourcequota %s), or pass --namespace (helm: tests.preflight.namespace) of a namespace with room", p.o.Namespace, m[1])
	}
	if strings.Contains(msg, "ValidatingAdmissionPolicy") {
		return "a ValidatingAdmissionPolicy refuses it: " + msg,
			"that policy refuses the LoadBalancer Service too (kubectl get validatingadmissionpolicies,validatingadmissionpolicybindings): ask its owner, or pass --namespace (helm: tests.preflight.namespace) of a namespace it does not cover"
	}
	if apierrors.IsForbidden(err) && strings.Contains(msg, "cannot create resource") {
		return "the account preflight runs as may not create Services there: " + msg,
			"allow create on services in namespace " + p.o.Namespace + " to that account (helm test's own RBAC does, in tests.preflight.namespace when set)"
	}
	return "the apiserver refused it: " + msg, "read the apiserver's message above: it names what refused the Service"
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
