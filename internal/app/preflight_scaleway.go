package app

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

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
		return "give the key's IAM application a policy on Project " + project + " with the permission sets " + scaleway.IPAMFullAccess + " and " + scaleway.PrivateNetworksReadOnly + " (docs/install.md, step 3)"
	}
	const create = "create an IAM application with the permission sets " + scaleway.IPAMFullAccess + " and " + scaleway.PrivateNetworksReadOnly + " on the cluster's Project, an API key for it, and the Secret the chart reads (docs/install.md, step 3)"
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: region, ClientOptions: p.o.ScalewayOptions})
	if err != nil {
		p.fail(checkCredentials, err.Error(), "set SCW_ACCESS_KEY, SCW_SECRET_KEY and SCW_DEFAULT_PROJECT_ID: "+create)
		return
	}
	project := cloud.ProjectID()
	// A list scoped to the Project: IAM answers for the key's rights there,
	// not just anywhere (a key of another Project's application would pass
	// an unscoped read). The tag matches nothing, so one page answers.
	_, err = cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: project, Tags: []string{probeTag}})
	switch kind := scaleway.Classify(err); {
	case err == nil:
	case kind == scaleway.KindUnauthenticated:
		p.fail(checkCredentials, fmt.Sprintf("Scaleway rejects %s (%v): the key does not exist, is revoked or expired, or the secret key does not match it", who, err),
			"put the access and secret key of an existing API key in the Secret (scw iam api-key get <access key> shows whether it exists and its expiry), or "+create)
		return
	case kind == scaleway.KindPermissionDenied && project != "":
		p.fail(checkCredentials, fmt.Sprintf("%s authenticates but may not list IPAM in Project %s (%v): its IAM application lacks %s there", who, project, err, scaleway.IPAMFullAccess), grant(project))
		return
	case kind == scaleway.KindPermissionDenied:
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

// probeTag is a tag no IP carries: a list by it is one empty page,
// whatever the Project holds. Preflight's credentials check and the API
// key's probe (keyReloader) list by it.
const probeTag = "scw-lb-ipam-probe"

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
	if err := inventory.Resolve(ctx, p.cloud, p.cfg); err != nil {
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
	if err := inventory.ResolvePool(ctx, p.cloud, p.cfg, pool.Name); err != nil {
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
		return "give the key's IAM application " + scaleway.PrivateNetworksReadOnly + " on the network's Project (docs/install.md, step 3)"
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
	at := time.Now()
	ips, err := p.cloud.ListIPs(ctx, scaleway.ListFilter{PrivateNetworkID: pool.PrivateNetworkID})
	if err != nil {
		fix := "check the network path to the Scaleway API and status.scaleway.com, then run again"
		if scaleway.Classify(err) == scaleway.KindPermissionDenied {
			fix = "give the key's IAM application " + scaleway.IPAMFullAccess + " on Project " + p.cloud.ProjectID() + " (docs/install.md, step 3)"
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
	if st := ipam.PoolStatsOf(pool, p.cfg.ClusterName, ipam.ReadAll(ips, at)); st.Total > 0 && st.Free == 0 && st.Retained > 0 {
		p.yielding[pool.Name] = st
		p.info(poolFullCheck(pool.Name), fmt.Sprintf("all %d addresses are booked, %d of them this cluster's reservations retained for deleted Services: "+
			"a new Service's CREATE has the oldest released early and books on its retry, so the pool is full but not exhausted (scw-lb-ipam status lists them)", st.Total, st.Retained))
	}
	if p.o.Write {
		p.canary(ctx, pool, used)
	}
}

// canary books an address in pool and releases it at once. It carries the
// ledger's tags, orphaned since now: if the release is lost, the sweeper
// takes it for this cluster's orphan and releases it after the retention.
func (p *preflight) canary(ctx context.Context, pool *ipam.Pool, used map[netip.Addr]bool) {
	check := poolCanaryCheck(pool.Name)
	if st, ok := p.yielding[pool.Name]; ok {
		p.info(check, fmt.Sprintf("not booked: the pool is full (see %s), and a canary would wait for one of its %d retained reservations to be released early; the other pools' canaries check the key's booking rights", poolFullCheck(pool.Name), st.Retained))
		return
	}
	entry := ipam.Entry{
		Cluster:       p.cfg.ClusterName,
		Pool:          pool.Name,
		Service:       types.NamespacedName{Namespace: p.o.releaseNamespace(), Name: PreflightCanaryName},
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
		p.fail(check, fmt.Sprintf("booking a canary address in pool %s: %v", pool.Name, err), canaryFix(err, req.Address, p.cloud.ProjectID()))
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
// about rights, of the key on projectID.
func canaryFix(err error, address netip.Addr, projectID string) string {
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
		return "give the key's IAM application " + scaleway.IPAMFullAccess + " on Project " + projectID + ": it may list but not book (docs/install.md, step 3)"
	case scaleway.KindUnavailable:
		return "check the network path to the Scaleway API and status.scaleway.com, then run again"
	}
	return "read Scaleway's message above, correct the pool and run again"
}
