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
func (d *deps) release(ctx context.Context, r *ipam.Grant) error {
	if r == nil || !r.Booked {
		return nil
	}
	if err := d.cloud.ReleaseIP(ctx, r.ID); err != nil && scaleway.Classify(err) != scaleway.KindNotFound {
		return err
	}
	d.inv.Forget(r.ID, r.Address)
	return nil
}

// IPs enter the allocator's admissions through the four calls below: each
// answer is read into a Reservation, its ledger parsed once, dated from when
// the call was sent. Handover, a command's, reads its own, undated.

func (d *deps) getIP(ctx context.Context, id string) (*ipam.Reservation, error) {
	at := d.clock.Now()
	ip, err := d.cloud.GetIP(ctx, id)
	if err != nil {
		return nil, err
	}
	return ipam.Read(ip, at), nil
}

func (d *deps) listIPs(ctx context.Context, f scaleway.ListFilter) ([]*ipam.Reservation, error) {
	at := d.clock.Now()
	ips, err := d.cloud.ListIPs(ctx, f)
	return ipam.ReadAll(ips, at), err
}

func (d *deps) bookIP(ctx context.Context, req scaleway.BookRequest) (*ipam.Reservation, error) {
	at := d.clock.Now()
	ip, err := d.cloud.BookIP(ctx, req)
	if err != nil {
		return nil, err
	}
	return ipam.Read(ip, at), nil
}

// setLedger writes e on IP id; the answer is nil when the API sent no IP
// back.
func (d *deps) setLedger(ctx context.Context, id string, e ipam.Entry) (*ipam.Reservation, error) {
	at := d.clock.Now()
	ip, err := d.cloud.SetTags(ctx, id, e.Tags())
	if err != nil || ip == nil {
		return nil, err
	}
	return ipam.Read(ip, at), nil
}
