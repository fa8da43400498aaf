package allocator

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// deps are what the allocator's parts read and call, set once by New.
type deps struct {
	inv    *inventory.Inventory
	cloud  scaleway.Cloud
	refs   References
	claims Claims
	policy ipam.Retention
	clock  clock.Clock
	log    logr.Logger
}

// release gives back a reservation this admission booked; one already gone
// is no error.
func (d *deps) release(ctx context.Context, r *ipam.Reservation) error {
	if r == nil || !r.Booked {
		return nil
	}
	if err := d.cloud.ReleaseIP(ctx, r.ID); err != nil && scaleway.Classify(err) != scaleway.KindNotFound {
		return err
	}
	d.inv.Forget(r.ID, r.Address)
	return nil
}
