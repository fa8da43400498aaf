package ipam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// yielder makes room when a pool, or a namespace's share of it, is full:
// the retention of deleted Services' reservations is a promise kept only
// while the pool has room. It brings the release of the oldest retained
// reservation forward under the release protocol (Retention.Yield) and
// answers with a retryable refusal; the sweeper's leader releases it once
// the margin has passed, re-reading it first, and the client's retry books.
type yielder struct {
	a *Allocator
	// mu guards asked: per Service and pool, the reservation whose release
	// was brought forward for it, and until when a retry waits for it
	// rather than bringing another one forward. Per replica: a Service
	// whose retries alternate between replicas brings at most one forward
	// on each.
	mu    sync.Mutex
	asked map[askKey]asked
}

// askKey is one Service's request in one pool, for the pool or for the
// namespace's share of it (each judged from a listing of its own): a
// Service asking two full pools waits for a release in each.
type askKey struct {
	svc  types.NamespacedName
	pool string
	of   string
}

// asked is a release brought forward for a request.
type asked struct {
	id    string
	until time.Time
}

// held is one booked address of a pool, as the ledger describes it.
type held struct {
	addr netip.Addr
	Holder
}

// heldOf describes listed IPs.
func heldOf(ips []*scaleway.IP) []held {
	out := make([]held, len(ips))
	for i, ip := range ips {
		out[i] = held{addr: ip.Address, Holder: holderOf(ip)}
	}
	return out
}

// full answers a request that found its pool exhausted: a retryable
// refusal while retained reservations of this cluster can make room, the
// exhaustion itself when every address is in use; with relist,
// errBookAgain when a listing shows room after all.
func (y *yielder) full(ctx context.Context, req Request, exhaustedErr error, relist bool) error {
	// The view the exhaustion was found in (or the background listing's,
	// when IPAM found it) may be older than what the sweeper did since:
	// reservations it shows unreferenced but not yet retained, or due for
	// release, are worth a listing before deciding.
	o := y.a.inv.existing(req.Pool)
	all := heldIn(o, req.Pool)
	if relist && y.unsure(ctx, req.Pool, all) {
		if fresh, err := y.a.inv.view(ctx, req.Pool, true); err == nil {
			all = heldIn(fresh, req.Pool)
			if req.Pool.PicksAddresses() && uint64(len(all)) < req.Pool.Total() {
				return errBookAgain
			}
		}
	}
	total := req.Pool.Total()
	what := FullPool(req.Pool.Name)
	return y.makeRoom(ctx, req, what, fmt.Sprintf("of its %d addresses", total), all, func([]held) error { return exhaustedErr })
}

// FullPool begins the refusal over a pool full of reservations, some of
// them retained: preflight knows the webhook's dry-run answer by it.
func FullPool(name string) string { return fmt.Sprintf("pool %q is full", name) }

// errBookAgain: a fresh listing shows room in a pool that looked full.
var errBookAgain = errors.New("the pool has room after a listing; book again")

// heldIn is what holds pool p in its subnet's view (nil: none known).
func heldIn(o *occupancy, p *Pool) []held {
	holders, _ := o.holdersIn(p)
	all := make([]held, 0, len(holders))
	for addr, h := range holders {
		all = append(all, held{addr: addr, Holder: h})
	}
	return all
}

// unsure reports whether the view holds this cluster's reservations that
// no live Service references and the sweeper had not marked retained, or
// whose release is due: the sweeper may have acted since it was listed.
func (y *yielder) unsure(ctx context.Context, p *Pool, all []held) bool {
	a, now := y.a, y.a.clock.Now()
	cluster := a.Config().ClusterName
	for _, h := range all {
		if h.Cluster != cluster || h.IPID == "" {
			continue
		}
		if h.RetainedSince.IsZero() {
			if refs, err := a.refs.ReferencedBy(ctx, h.IPID); err == nil && len(refs) == 0 {
				return true
			}
			continue
		}
		if a.policy.Expired(p, h.entry(), now) {
			return true
		}
	}
	return false
}

// makeRoom decides a full pool or share from what holds it: when this
// cluster's retained reservations are among them, the oldest that may yield
// is brought forward (or one already is) and the answer is a retryable
// refusal that says so; when all are in use, allInUse words the refusal.
// Its Scaleway calls are one re-read and one write: the candidates are
// chosen from what the listing showed (see sortHeld).
func (y *yielder) makeRoom(ctx context.Context, req Request, what, among string, all []held, allInUse func(live []held) error) error {
	a, now := y.a, y.a.clock.Now()
	hs, err := y.sortHeld(ctx, req.Pool, all, now)
	if err != nil {
		return err
	}
	n := len(hs.yieldable) + len(hs.releasing) + len(hs.notYet)
	if n+len(hs.settling) == 0 {
		return allInUse(hs.live)
	}
	wait := a.policy.RetryAfter()
	head := fmt.Sprintf("%s; %d %s are retained for deleted Services", what, n, among)
	if req.DryRun && n == 0 {
		return refuse(ReasonWouldYield, "%s; %d %s belong to no live Service and are not retained yet (just deleted, or being created); a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", what, len(hs.settling), among, seconds(wait))
	}
	if n == 0 {
		return yielding(wait, "%s; %d %s belong to no live Service and are not retained yet (just deleted, or being created); nothing was reserved, retry in ~%s", what, len(hs.settling), among, seconds(wait))
	}
	if req.DryRun {
		// Before anything remembered: nothing was brought forward for a
		// dry run, and not retryable, as a client's retries (client-go
		// retries a 429 with Retry-After, dry run or not) would wait for a
		// release that never comes.
		if len(hs.yieldable) > 0 {
			return refuse(ReasonWouldYield, "%s; a CREATE would release the oldest (%s, of the deleted %s) early and ask to be retried in ~%s; nothing was changed (dry run)", head, hs.yieldable[0].addr, hs.yieldable[0].Service, seconds(wait))
		}
		return refuse(ReasonWouldYield, "%s and being released; a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", head, seconds(wait))
	}
	key := askKey{req.Service, req.Pool.Name, among}
	if until, ok := y.waiting(key, all, now); ok {
		return yielding(until.Sub(now), "%s; the oldest is being released for this Service; nothing was reserved, retry in ~%s", head, seconds(until.Sub(now)))
	}
	if len(hs.yieldable) > 0 {
		h := hs.yieldable[0]
		ok, err := y.bringForward(ctx, req.Pool, h, now)
		if err != nil {
			return err
		}
		if !ok {
			// Changed since the listing (taken back, attached): the view
			// knows now, and the retry chooses again.
			return yielding(time.Second, "%s; the oldest (%s) changed since the pool was listed; nothing was reserved, retry in a moment", head, h.addr)
		}
		y.ask(key, h.IPID, now.Add(wait))
		return yielding(wait, "%s; the oldest (%s, of the deleted %s) is being released; nothing was reserved, retry in ~%s", head, h.addr, h.Service, seconds(wait))
	}
	if len(hs.releasing) == 0 {
		return yielding(wait, "%s, none of which may be released yet (deleted within the last %s, when a re-create may still take them back, or still attached to a Load Balancer being deleted); nothing was reserved, retry in ~%s", head, seconds(a.policy.Margin), seconds(wait))
	}
	return yielding(wait, "%s and already being released; nothing was reserved, retry in ~%s", head, seconds(wait))
}

// holders is what holds a full pool, by what this cluster's reservations
// among them may do; the rest (another cluster's, someone else's) are never
// touched.
type holders struct {
	live []held
	// yieldable may have their release brought forward, oldest first.
	yieldable []held
	// releasing are inside their dead zone already.
	releasing []held
	// notYet are retained but may not yield yet: attached to a Load
	// Balancer being deleted, orphaned within the margin, or with a stale
	// release time the sweeper is to rewrite.
	notYet []held
	// settling belong to no live Service and are not retained yet.
	settling []held
}

// sortHeld sorts what holds a pool from the listing alone: only the one
// chosen to yield is re-read (bringForward), so a pool full of attached or
// just-deleted reservations costs no call per reservation.
func (y *yielder) sortHeld(ctx context.Context, pool *Pool, all []held, now time.Time) (hs holders, err error) {
	a := y.a
	cfg := a.Config()
	for _, h := range all {
		if h.Cluster != cfg.ClusterName || h.IPID == "" {
			continue
		}
		refs, err := a.refs.ReferencedBy(ctx, h.IPID)
		if err != nil {
			return holders{}, cacheError(err)
		}
		e := h.entry()
		switch {
		case len(refs) > 0:
			hs.live = append(hs.live, h)
		case h.RetainedSince.IsZero():
			// Unreferenced, not yet marked by the sweeper: a Service just
			// deleted, or one being created. Neither yields yet.
			hs.settling = append(hs.settling, h)
		case a.policy.Releasing(pool, e, now):
			hs.releasing = append(hs.releasing, h)
		case h.Resource != nil || !a.policy.Yieldable(pool, e, now):
			hs.notYet = append(hs.notYet, h)
		default:
			hs.yieldable = append(hs.yieldable, h)
		}
	}
	slices.SortFunc(hs.yieldable, func(x, y held) int {
		return cmp.Or(x.RetainedSince.Compare(y.RetainedSince), x.addr.Compare(y.addr))
	})
	return hs, nil
}

// bringForward re-reads one retained reservation and, if it may still
// yield (still ours, retained, unattached, referenced by no live Service,
// not orphaned within the margin), sets its release-at. The re-read keeps
// a reservation a re-create took back since the listing out of it; the
// margin covers one taking it back between the re-read and the write
// (see Retention). What the re-read shows goes into the view, so that a
// retry does not choose from the same stale listing again.
func (y *yielder) bringForward(ctx context.Context, pool *Pool, h held, now time.Time) (bool, error) {
	a := y.a
	cfg := a.Config()
	ip, err := a.cloud.GetIP(ctx, h.IPID)
	if scaleway.Classify(err) == scaleway.KindNotFound {
		a.inv.forget(h.IPID, h.addr)
		return false, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, yielding(time.Second, "pool %q is full and the admission's deadline ran out while it made room; nothing was reserved, retry in a moment", pool.Name)
		}
		return false, apiError(fmt.Sprintf("reading the retained reservation %s of pool %q", h.addr, pool.Name), err)
	}
	e, ok := ParseEntry(ip.Tags)
	if !ok || !e.Owns(cfg.ClusterName) {
		a.inv.record(pool, ip)
		return false, nil
	}
	refs, err := a.refs.ReferencedBy(ctx, ip.ID)
	if err != nil {
		return false, cacheError(err)
	}
	p, _ := cfg.PoolOf(e, ip.SubnetID, ip.Address)
	if len(refs) > 0 || ip.Resource != nil || !a.policy.Yieldable(p, e, now) {
		a.inv.record(pool, ip)
		return false, nil
	}
	updated, err := a.cloud.SetTags(ctx, ip.ID, a.policy.Yield(e, now).Tags())
	if err != nil {
		return false, apiError(fmt.Sprintf("releasing the retained reservation %s of pool %q early", h.addr, pool.Name), err)
	}
	if updated != nil {
		a.inv.record(pool, updated)
	}
	a.log.Info("a full pool brings a retained reservation's release forward", "pool", pool.Name, "address", ip.Address.String(), "ipamID", ip.ID, "service", e.Service.String(), "orphanedSince", e.OrphanedSince.Format(time.RFC3339))
	return true, nil
}

// waiting reports until when a retry of the request waits for the release
// brought forward for it (a second from now at least, once that is past),
// forgetting those long past. Once the listing no longer holds that
// reservation it was released: the request books, or, the pool full
// again, brings another forward.
func (y *yielder) waiting(key askKey, all []held, now time.Time) (time.Time, bool) {
	y.mu.Lock()
	defer y.mu.Unlock()
	// Kept a while past the expected release: a slow cycle (or one at its
	// cap of releases) must not make the next retry bring another forward.
	for k, a := range y.asked {
		if !now.Before(a.until.Add(y.a.policy.RetryAfter())) {
			delete(y.asked, k)
		}
	}
	a, ok := y.asked[key]
	if !ok {
		return time.Time{}, false
	}
	if !slices.ContainsFunc(all, func(h held) bool { return h.IPID == a.id }) {
		delete(y.asked, key)
		return time.Time{}, false
	}
	if soon := now.Add(time.Second); a.until.Before(soon) {
		return soon, true
	}
	return a.until, true
}

func (y *yielder) ask(key askKey, id string, until time.Time) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.asked == nil {
		y.asked = map[askKey]asked{}
	}
	y.asked[key] = asked{id: id, until: until}
}

func yielding(after time.Duration, format string, args ...any) *Error {
	return &Error{Reason: ReasonYielding, RetryAfter: max(after, time.Second), Message: fmt.Sprintf(format, args...)}
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%d s", int((d+time.Second-1)/time.Second))
}

// services names the Services holding addresses, sorted, at most ten.
func services(hs []held) string {
	names := make([]string, 0, len(hs))
	for _, h := range hs {
		names = append(names, h.Service.Name)
	}
	slices.Sort(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(", and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}
