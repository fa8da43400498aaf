package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// Refresh lists the subnet of every pool, each subnet once: pools that pick
// addresses need it to pick, and Stats reports from it.
func (v *Inventory) Refresh(ctx context.Context) error {
	var errs []error
	// Hints older than every subnet's listing are redundant: each index has
	// what they named. A listing joined in flight may have started before
	// some; a subnet whose listing failed counts from its last one, or from
	// a TTL ago (past it, the sticky path lists the Service and reads no
	// hint), so that failures do not let hints pile up.
	var oldest time.Time
	older := func(t time.Time) {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	seen := map[string]bool{}
	for _, p := range v.Config().Pools {
		if seen[p.SubnetID()] {
			continue
		}
		seen[p.SubnetID()] = true
		o, err := v.subnets.view(ctx, p, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the addresses of pool %q: %w", p.Name, err))
			since := v.subnets.clock.Now().Add(-v.subnets.ttl)
			if o = v.subnets.existing(p); o != nil {
				o.mu.Lock()
				if o.since.After(since) {
					since = o.since
				}
				o.mu.Unlock()
			}
			older(since)
			continue
		}
		o.mu.Lock()
		older(o.since)
		o.mu.Unlock()
	}
	if !oldest.IsZero() {
		v.dropHints(oldest)
	}
	return errors.Join(errs...)
}

// Start keeps the occupancy views and reservation indexes of the pools
// fresh in the background, so that admissions do not pay for listings and
// Stats stays current. It lists them once right away and then every
// refresh interval until ctx ends; a failed listing waits for the next
// tick (past the TTL, admissions list by themselves). It implements
// controller-runtime's manager.Runnable.
func (v *Inventory) Start(ctx context.Context) error {
	tick := v.subnets.clock.NewTicker(v.refresh)
	defer tick.Stop()
	for {
		if err := v.Refresh(ctx); err != nil && ctx.Err() == nil {
			v.log.Error(err, "refreshing the pools' occupancy")
		}
		v.firstOnce.Do(func() { close(v.firstListing) })
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
	}
}

// Listed reports whether Start's first listing of the pools has ended
// (failed ones included: admissions then list by themselves). A replica is
// ready only then, so that its first admissions book in one call instead of
// each listing what the index would have told.
func (v *Inventory) Listed() bool {
	select {
	case <-v.firstListing:
		return true
	default:
		return false
	}
}

// Relist asks the next pick in p's subnet to list it again, as conflicts
// do; the view in use serves admissions meanwhile.
func (sub *Subnets) Relist(p *ipam.Pool) {
	if o := sub.existing(p); o != nil {
		o.mu.Lock()
		o.relist = true
		o.mu.Unlock()
	}
}

// Relisting reports whether a listing of p's subnet is asked for and has
// not run yet.
func (sub *Subnets) Relisting(p *ipam.Pool) bool {
	o := sub.existing(p)
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.relist
}
