package inventory

import (
	"context"
	"fmt"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Resolve reads the Private Networks cfg names, one GetPrivateNetwork each,
// and binds the pools to their subnets (ipam.Config.Bind).
func Resolve(ctx context.Context, cloud scaleway.Cloud, cfg *ipam.Config) error {
	return cfg.Bind(networks(ctx, cloud, cfg.NetworkIDs()))
}

// ResolvePool resolves the named pool alone (ipam.Config.BindPool): one
// GetPrivateNetwork.
func ResolvePool(ctx context.Context, cloud scaleway.Cloud, cfg *ipam.Config, name string) error {
	p, ok := cfg.Pool(name)
	if !ok {
		return fmt.Errorf("no pool %q in the pool file", name)
	}
	return cfg.BindPool(name, networks(ctx, cloud, []string{p.PrivateNetworkID}))
}

func networks(ctx context.Context, cloud scaleway.Cloud, ids []string) ipam.Networks {
	n := ipam.Networks{Project: cloud.ProjectID(), Found: map[string]*scaleway.PrivateNetwork{}, Failed: map[string]error{}}
	for _, id := range ids {
		if pn, err := cloud.GetPrivateNetwork(ctx, id); err != nil {
			n.Failed[id] = err
		} else {
			n.Found[id] = pn
		}
	}
	return n
}
