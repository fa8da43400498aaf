package scaleway

import (
	"context"
	"net/netip"
	"time"
)

// Cloud is the part of the Scaleway API the allocator, sweeper and status
// command need: IPAM IPs of one region and the Private Networks they live in.
// Implementations retry transient failures within the caller's deadline.
type Cloud interface {
	// BookIP reserves an address. It is not retried on answers that may have
	// committed (5xx, lost connections): the allocator recovers those through
	// the ledger instead of booking twice.
	BookIP(ctx context.Context, req BookRequest) (*IP, error)
	GetIP(ctx context.Context, id string) (*IP, error)
	// ListIPs returns every IP matching the filter, reading all pages.
	ListIPs(ctx context.Context, filter ListFilter) ([]*IP, error)
	// SetTags replaces the tags of an IP.
	SetTags(ctx context.Context, id string, tags []string) (*IP, error)
	ReleaseIP(ctx context.Context, id string) error
	GetPrivateNetwork(ctx context.Context, id string) (*PrivateNetwork, error)
	// ProjectID is the Project BookIP books in: the credentials' default
	// (SCW_DEFAULT_PROJECT_ID), empty when none is set. IPAM books an
	// address on a Private Network only in that network's own Project.
	ProjectID() string
}

// IP is one IPAM IP as the project sees it.
type IP struct {
	ID string
	// Address is the bare address; IPAM answers it in CIDR form with the
	// subnet's prefix length.
	Address   netip.Addr
	SubnetID  string
	IsIPv6    bool
	Tags      []string
	Resource  *Resource // nil while attached to nothing
	CreatedAt time.Time
	Region    string
}

// ResourceLoadBalancer is the IPAM resource type of a Load Balancer.
const ResourceLoadBalancer = "lb_server"

// Resource is what an IP is attached to, e.g. a Load Balancer ("lb_server").
type Resource struct {
	Type string
	ID   string
	Name string
}

// String names the holder for users: "lb_server my-lb".
func (r *Resource) String() string {
	if r.Name == "" {
		return r.Type + " " + r.ID
	}
	return r.Type + " " + r.Name
}

// BookRequest asks IPAM for one address on a Private Network.
type BookRequest struct {
	PrivateNetworkID string
	IPv6             bool
	// Address is the address to book; the zero Addr lets IPAM choose.
	Address netip.Addr
	Tags    []string
}

// Pager is a Cloud that can hand a listing over page by page, so that a
// caller that reads each IP once never holds the whole listing.
type Pager interface {
	ListIPPages(ctx context.Context, f ListFilter, fn func(page []*IP) error) error
}

// EachPage hands fn the IPs matching f page by page when c is a Pager, else
// the whole listing as one page.
func EachPage(ctx context.Context, c Cloud, f ListFilter, fn func(page []*IP) error) error {
	if p, ok := c.(Pager); ok {
		return p.ListIPPages(ctx, f, fn)
	}
	ips, err := c.ListIPs(ctx, f)
	if err != nil {
		return err
	}
	return fn(ips)
}

// ListFilter narrows ListIPs. Tags match an IP carrying any one of them, as
// IPAM does: callers check the full tag set themselves.
type ListFilter struct {
	PrivateNetworkID string
	// ProjectID lists that Project's IPs only; IAM then answers for that
	// Project's rights, whatever the key's default.
	ProjectID string
	Tags      []string
	IPv6      *bool
	// OldestFirst orders by booking time, oldest first (IPAM's default is
	// newest first).
	OldestFirst bool
}

// PrivateNetwork is a VPC Private Network and its subnets.
type PrivateNetwork struct {
	ID   string
	Name string
	// ProjectID is the Project the network belongs to, the only one IPAM
	// books its addresses in.
	ProjectID string
	Subnets   []Subnet
}

// Subnet is one CIDR block of a Private Network.
type Subnet struct {
	ID     string
	Prefix netip.Prefix
}
