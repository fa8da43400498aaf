package scaleway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"time"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	vpcapi "github.com/scaleway/scaleway-sdk-go/api/vpc/v2"
	"github.com/scaleway/scaleway-sdk-go/scw"
	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultPageSize is how many IPs one ListIPs page asks for; the webhook,
// the sweeper and status all use it. ListIPs pages until total_count
// whatever size the pages come back in (see listNewestFirst).
const DefaultPageSize = 100

// CallObserver is told about every HTTP call to Scaleway: the operation, the
// HTTP status (0 when no answer came) and how long it took. Metrics hang here.
type CallObserver func(op string, status int, d time.Duration)

// Options configures New.
type Options struct {
	// Region of every IPAM and VPC call, e.g. "fr-par".
	Region string
	// ClientOptions add to (and override) the SDK's environment
	// (SCW_ACCESS_KEY, SCW_SECRET_KEY, SCW_DEFAULT_PROJECT_ID, SCW_API_URL…).
	ClientOptions []scw.ClientOption
	// Backoff paces retries; the zero value retries five times over about
	// three seconds (the caller's deadline cuts it shorter inside an
	// admission).
	Backoff wait.Backoff
	// PageSize of ListIPs; 0 uses DefaultPageSize.
	PageSize uint32
	// Observe, when set, sees every HTTP call.
	Observe CallObserver
	// Key, when set, signs every call instead of the SDK environment's
	// secret key; Key.Set rotates it without a new Cloud.
	Key *Key
}

// defaultBackoff is Options.Backoff's zero value.
func defaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: 2 * time.Second}
}

// quoted matches the values the SDK quotes in its configuration errors.
var quoted = regexp.MustCompile(`'[^']*'`)

// scwCloud implements Cloud on scaleway-sdk-go.
type scwCloud struct {
	region   scw.Region
	project  string
	ipam     *ipamapi.API
	vpc      *vpcapi.API
	backoff  wait.Backoff
	pageSize uint32
}

var (
	_ Cloud = (*scwCloud)(nil)
	_ Pager = (*scwCloud)(nil)
)

// New builds a Cloud from the SDK environment (scw.WithEnv, and a config
// profile when one is there) plus opts. It calls the API once, so that bad
// credentials or an unreachable endpoint fail at start and not at the first
// admission.
func New(ctx context.Context, opts Options) (Cloud, error) {
	region, err := scw.ParseRegion(opts.Region)
	if err != nil {
		return nil, fmt.Errorf("region %q: %w", opts.Region, err)
	}
	hc := &observingClient{
		next:    &http.Client{Timeout: 30 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		observe: opts.Observe,
		key:     opts.Key,
	}
	clientOpts := []scw.ClientOption{scw.WithUserAgent("scw-lb-ipam")}
	if cfg, err := scw.LoadConfig(); err == nil {
		if p, err := cfg.GetActiveProfile(); err == nil {
			clientOpts = append(clientOpts, scw.WithProfile(p))
		}
	}
	clientOpts = append(clientOpts, scw.WithEnv(), scw.WithDefaultRegion(region), scw.WithHTTPClient(hc))
	clientOpts = append(clientOpts, opts.ClientOptions...)
	client, err := scw.NewClient(clientOpts...)
	if err != nil {
		// The SDK quotes the offending value, which may be a secret key.
		return nil, fmt.Errorf("scaleway client settings (SCW_* environment or profile): %s", quoted.ReplaceAllString(err.Error(), "'<redacted>'"))
	}
	// The SDK caches the API metadata in the client without a lock; reading
	// it once here, before any concurrent use, keeps later calls read-only.
	if _, err := client.GetAPIMetadata(); err != nil {
		return nil, fmt.Errorf("reaching the Scaleway API: %w", err)
	}
	// BookIP leaves project_id to the SDK, which fills in this default: it
	// is the Project every booking lands in.
	project, _ := client.GetDefaultProjectID()
	c := &scwCloud{
		region:   region,
		project:  project,
		ipam:     ipamapi.NewAPI(client),
		vpc:      vpcapi.NewAPI(client),
		backoff:  opts.Backoff,
		pageSize: opts.PageSize,
	}
	if c.backoff.Steps == 0 {
		c.backoff = defaultBackoff()
	}
	if c.pageSize == 0 {
		c.pageSize = DefaultPageSize
	}
	return c, nil
}

func (c *scwCloud) ProjectID() string { return c.project }

func (c *scwCloud) BookIP(ctx context.Context, req BookRequest) (*IP, error) {
	sdkReq := &ipamapi.BookIPRequest{
		Region: c.region,
		Source: &ipamapi.Source{PrivateNetworkID: scw.StringPtr(req.PrivateNetworkID)},
		IsIPv6: req.IPv6,
		Tags:   req.Tags,
	}
	if req.Address.IsValid() {
		a := net.IP(req.Address.AsSlice())
		sdkReq.Address = &a
	}
	var ip *ipamapi.IP
	err := c.retry(ctx, definitelyNotCommitted, func(ctx context.Context) (err error) {
		ip, err = c.ipam.BookIP(sdkReq, scw.WithContext(ctx))
		return err
	})
	if err != nil {
		return nil, err
	}
	return fromSDK(ip), nil
}

func (c *scwCloud) GetIP(ctx context.Context, id string) (*IP, error) {
	var ip *ipamapi.IP
	err := c.retry(ctx, retryable, func(ctx context.Context) (err error) {
		ip, err = c.ipam.GetIP(&ipamapi.GetIPRequest{Region: c.region, IPID: id}, scw.WithContext(ctx))
		return err
	})
	if err != nil {
		return nil, err
	}
	return fromSDK(ip), nil
}

// ListIPs reads every page, Options.PageSize IPs at a time (see
// ListIPPages), and returns them all.
func (c *scwCloud) ListIPs(ctx context.Context, f ListFilter) ([]*IP, error) {
	var out []*IP
	err := c.listNewestFirst(ctx, f, func(page []*IP) error {
		out = append(out, page...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if f.OldestFirst {
		slices.Reverse(out)
	}
	return out, nil
}

// ListIPPages hands fn every page, Options.PageSize IPs at a time, each IP
// once: every IP that exists for the whole listing is handed over, however
// many are booked or released meanwhile (see listNewestFirst for the limit). OldestFirst
// hands the whole listing over as one page, as it is read newest first.
// An error of fn ends the listing with it.
func (c *scwCloud) ListIPPages(ctx context.Context, f ListFilter, fn func([]*IP) error) error {
	if f.OldestFirst {
		ips, err := c.ListIPs(ctx, f)
		if err != nil {
			return err
		}
		return fn(ips)
	}
	return c.listNewestFirst(ctx, f, fn)
}

// listNewestFirst pages through the IPs f matches, newest first, and hands
// fn each IP once. IPAM pages by offset, so a change between two pages
// moves the IPs behind it. Newest first, a booking lands in front of every
// page and only pushes IPs onto a page still to come (handed once); a
// release pulls the IPs behind it one place forward, the first of the next
// page into one already read, and total_count drops by one. Oldest first,
// a booking would land behind the listing and hide such a drop; so can an
// IP re-tagged into f (an adoption, a handover), which keeps its place.
//
// A short page is not the end: the API may answer fewer than asked (a lower
// cap than page_size), so offsets are counted in the longest page seen.
// Nothing changed, the listing costs no call more than its pages; a drop of
// d costs ceil(d / page size) + 1 calls more.
func (c *scwCloud) listNewestFirst(ctx context.Context, f ListFilter, fn func([]*IP) error) error {
	seen := map[string]bool{}
	stride, total := 1, uint64(0) // total is the previous answer's total_count
	for page := int32(1); ; page++ {
		resp, err := c.listPage(ctx, f, page)
		if err != nil {
			return err
		}
		out := make([]*IP, 0, len(resp.IPs))
		for _, ip := range resp.IPs {
			if !seen[ip.ID] {
				seen[ip.ID] = true
				out = append(out, fromSDK(ip))
			}
		}
		if err := fn(out); err != nil {
			return err
		}
		stride = max(stride, len(resp.IPs))
		if resp.TotalCount < total {
			// Releases pulled up to a drop's worth of IPs into pages read: read them again.
			back := (total - resp.TotalCount + uint64(stride) - 1) / uint64(stride)
			page = int32(max(0, int64(page)-1-int64(back)))
		} else if uint64(page-1)*uint64(stride)+uint64(len(resp.IPs)) >= resp.TotalCount {
			return nil
		}
		total = resp.TotalCount
	}
}

// listPage reads one page of the IPs f matches, newest first.
func (c *scwCloud) listPage(ctx context.Context, f ListFilter, page int32) (*ipamapi.ListIPsResponse, error) {
	req := &ipamapi.ListIPsRequest{
		Region:   c.region,
		Page:     scw.Int32Ptr(page),
		PageSize: scw.Uint32Ptr(c.pageSize),
		Tags:     f.Tags,
		IsIPv6:   f.IPv6,
		OrderBy:  ipamapi.ListIPsRequestOrderByCreatedAtDesc,
	}
	if f.PrivateNetworkID != "" {
		req.PrivateNetworkID = scw.StringPtr(f.PrivateNetworkID)
	}
	// Every list names a Project: IAM refuses a list across the
	// organisation (403) to a key whose policy covers some Projects only,
	// as the install guide's does (scaleway/scaleway-cli#5686). A pool's
	// IPs are in its network's Project, which must be the key's.
	if project := cmp.Or(f.ProjectID, c.project); project != "" {
		req.ProjectID = scw.StringPtr(project)
	}
	var resp *ipamapi.ListIPsResponse
	err := c.retry(ctx, retryable, func(ctx context.Context) (err error) {
		resp, err = c.ipam.ListIPs(req, scw.WithContext(ctx))
		return err
	})
	return resp, err
}

func (c *scwCloud) SetTags(ctx context.Context, id string, tags []string) (*IP, error) {
	if tags == nil {
		tags = []string{} // nil would leave the tags as they are
	}
	var ip *ipamapi.IP
	err := c.retry(ctx, retryable, func(ctx context.Context) (err error) {
		ip, err = c.ipam.UpdateIP(&ipamapi.UpdateIPRequest{Region: c.region, IPID: id, Tags: &tags}, scw.WithContext(ctx))
		return err
	})
	if err != nil {
		return nil, err
	}
	return fromSDK(ip), nil
}

func (c *scwCloud) ReleaseIP(ctx context.Context, id string) error {
	return c.retry(ctx, retryable, func(ctx context.Context) error {
		err := c.ipam.ReleaseIP(&ipamapi.ReleaseIPRequest{Region: c.region, IPID: id}, scw.WithContext(ctx))
		return err
	})
}

func (c *scwCloud) GetPrivateNetwork(ctx context.Context, id string) (*PrivateNetwork, error) {
	var pn *vpcapi.PrivateNetwork
	err := c.retry(ctx, retryable, func(ctx context.Context) (err error) {
		pn, err = c.vpc.GetPrivateNetwork(&vpcapi.GetPrivateNetworkRequest{Region: c.region, PrivateNetworkID: id}, scw.WithContext(ctx))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &PrivateNetwork{ID: pn.ID, Name: pn.Name, ProjectID: pn.ProjectID}
	for _, s := range pn.Subnets {
		p, ok := netipx.FromStdIPNet(&s.Subnet.IPNet)
		if !ok {
			continue
		}
		out.Subnets = append(out.Subnets, Subnet{ID: s.ID, Prefix: p.Masked()})
	}
	return out, nil
}

// retry runs call until it succeeds, fails with an error again() refuses,
// runs out of backoff steps, or the next wait would pass ctx's deadline. The
// last error is returned as it came, so Classify still sees it.
func (c *scwCloud) retry(ctx context.Context, again func(error) bool, call func(context.Context) error) error {
	b := c.backoff
	hint := &retryHint{}
	ctx = context.WithValue(ctx, retryHintKey{}, hint)
	for {
		err := call(ctx)
		if err == nil || !again(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				return fmt.Errorf("%w (%w)", ctx.Err(), err)
			}
			return err
		}
		if b.Steps <= 1 {
			return err
		}
		wait := b.Step()
		if ra := hint.take(); ra > wait {
			wait = ra // the server knows best how long it needs
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func fromSDK(ip *ipamapi.IP) *IP {
	out := &IP{ID: ip.ID, IsIPv6: ip.IsIPv6, Tags: ip.Tags, Region: ip.Region.String()}
	if p, ok := netipx.FromStdIPNet(&ip.Address.IPNet); ok {
		out.Address = p.Addr()
	}
	if ip.Source != nil && ip.Source.SubnetID != nil {
		out.SubnetID = *ip.Source.SubnetID
	}
	if ip.CreatedAt != nil {
		out.CreatedAt = *ip.CreatedAt
	}
	if ip.Resource != nil {
		out.Resource = &Resource{Type: ip.Resource.Type.String(), ID: ip.Resource.ID}
		if ip.Resource.Name != nil {
			out.Resource.Name = *ip.Resource.Name
		}
	}
	return out
}
