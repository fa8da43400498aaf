package allocator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// A full pool, or a namespace's full share of one, makes room: the
// retention of deleted Services' reservations is a promise kept only while
// the pool has room. The oldest retained reservation's release is brought
// forward under the release protocol (Retention.Yield) and the answer is a
// retryable refusal; the sweeper's leader releases it once the margin has
// passed, re-reading it first, and the client's retry books.

// errBookAgain: a re-read shows room in a pool that looked full.
var errBookAgain = errors.New("the pool has room after a re-read; book again")

// full answers a request that found its pool exhausted: a retryable
// refusal while retained reservations of this cluster can make room, the
// exhaustion itself when every address is in use; with reread,
// errBookAgain when a re-read shows room after all.
func (y *room) full(ctx context.Context, req ipam.Request, exhaustedErr error, reread bool) error {
	// The view the exhaustion was found in (or the background listing's,
	// when IPAM found it) may be older than what the sweeper did since: a
	// reservation it shows unreferenced but not yet retained, or due for
	// release, is worth one re-read before deciding. One, not a listing of
	// the subnet: that would cost a page per 100 IPs of every tenant on it.
	all := y.inv.Subnets().HeldIn(req.Pool)
	if reread {
		if h, ok := y.policy.Unsure(y.inv.Config().ClusterName, req.Pool, all, y.liveOrUnknown(ctx, all), y.clock.Now()); ok {
			if y.refresh(ctx, req.Pool, h) {
				return errBookAgain
			}
			all = y.inv.Subnets().HeldIn(req.Pool)
		}
	}
	hs, err := y.classify(ctx, req.Pool, all)
	if err != nil {
		return err
	}
	f := y.policy.PoolFull(req.Pool, hs)
	if err := y.makeRoom(ctx, req, f, all); err != nil {
		return err
	}
	return exhaustedErr
}

// makeRoom answers a full pool or share f: a refusal, after bringing the
// oldest retained reservation's release forward when one may yield; nil
// when every address is in use by a live Service (the caller words that).
// Its Scaleway calls are one re-read and one write: the candidates were
// chosen from what the listing showed (Retention.Classify).
func (y *room) makeRoom(ctx context.Context, req ipam.Request, f ipam.Full, all []*ipam.Reservation) error {
	now := y.clock.Now()
	key := inventory.AskKey{Service: req.Service, Pool: req.Pool.Name, Of: f.Among}
	var waiting time.Time
	if !req.DryRun {
		waiting = y.inv.Asks().Waiting(key, all, now)
	}
	refusal, h := f.Decide(req.DryRun, waiting, now)
	if refusal != nil || h == nil {
		return asError(refusal)
	}
	ok, err := y.bringForward(ctx, req.Pool, h, now)
	switch {
	case err != nil:
		return err
	case !ok:
		// Changed since the listing: the view knows now.
		return f.Changed(h)
	}
	y.inv.Asks().Ask(key, h.ID, now.Add(f.RetryAfter))
	return f.Yielded(h)
}

// refresh re-reads one reservation of pool into the view; room is true
// when it is gone (the sweeper released it): the pool has room. An error
// leaves the view as it was: the decision is made on it.
func (y *room) refresh(ctx context.Context, pool *ipam.Pool, h *ipam.Reservation) (room bool) {
	ip, err := y.getIP(ctx, h.ID)
	switch {
	case scaleway.Classify(err) == scaleway.KindNotFound:
		y.inv.Forget(h.ID, h.Address)
		return true
	case err == nil:
		y.inv.Subnets().Record(pool, ip)
	}
	return false
}

// asError keeps a nil *Error a nil error.
func asError(e *ipam.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// classify sorts what holds a pool, asking the Service cache which of this
// cluster's reservations a live Service references.
func (y *room) classify(ctx context.Context, pool *ipam.Pool, all []*ipam.Reservation) (ipam.Holders, error) {
	cluster := y.inv.Config().ClusterName
	referenced := map[string]bool{}
	for _, h := range all {
		if h.Cluster != cluster || h.ID == "" {
			continue
		}
		refs, err := y.refs.ReferencedBy(ctx, h.ID)
		if err != nil {
			return ipam.Holders{}, ipam.CacheUnavailable(err)
		}
		referenced[h.ID] = len(refs) > 0
	}
	return y.policy.Classify(cluster, pool, all, referenced, y.clock.Now()), nil
}

// liveOrUnknown is the referenced set of Retention.Unsure: an ID the cache
// cannot answer for counts as referenced, as it makes no listing worth it.
func (y *room) liveOrUnknown(ctx context.Context, all []*ipam.Reservation) map[string]bool {
	referenced := map[string]bool{}
	for _, h := range all {
		if h.ID != "" && h.OrphanedSince.IsZero() {
			refs, err := y.refs.ReferencedBy(ctx, h.ID)
			referenced[h.ID] = err != nil || len(refs) > 0
		}
	}
	return referenced
}

// bringForward re-reads one retained reservation and, if it may still
// yield (still ours, retained, unattached, referenced by no live Service,
// not orphaned within the margin), sets its release-at. The re-read keeps
// a reservation a re-create took back since the listing out of it; the
// margin covers one taking it back between the re-read and the write
// (see Retention). What the re-read shows goes into the view, so that a
// retry does not choose from the same stale listing again.
func (y *room) bringForward(ctx context.Context, pool *ipam.Pool, h *ipam.Reservation, now time.Time) (bool, error) {
	cfg := y.inv.Config()
	ip, err := y.getIP(ctx, h.ID)
	switch {
	case scaleway.Classify(err) == scaleway.KindNotFound:
		y.inv.Forget(h.ID, h.Address)
		return false, nil
	case err != nil && ctx.Err() != nil:
		return false, ipam.OutOfTime(pool)
	case err != nil:
		return false, ipam.APIError(fmt.Sprintf("reading the retained reservation %s of pool %q", h.Address, pool.Name), err)
	}
	e := ip.Entry
	if !e.Owns(cfg.ClusterName) {
		y.inv.Subnets().Record(pool, ip)
		return false, nil
	}
	refs, err := y.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return false, ipam.CacheUnavailable(err)
	}
	p, _ := cfg.PoolOf(e, ip.SubnetID, ip.Address)
	if len(refs) > 0 || ip.Resource != nil || !y.policy.Yieldable(p, e, now) {
		y.inv.Subnets().Record(pool, ip)
		return false, nil
	}
	updated, err := y.setLedger(ctx, ip.ID, y.policy.Yield(e, now))
	if err != nil {
		return false, ipam.APIError(fmt.Sprintf("releasing the retained reservation %s of pool %q early", h.Address, pool.Name), err)
	}
	if updated != nil {
		y.inv.Subnets().Record(pool, updated)
	}
	y.log.Info("a full pool brings a retained reservation's release forward", "pool", pool.Name, "address", ip.Address.String(), "ipamID", ip.ID, "service", e.Service.String(), "orphanedSince", e.OrphanedSince.Format(time.RFC3339))
	return true, nil
}
