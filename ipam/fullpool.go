package ipam

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Holders is what holds a full pool (or a namespace's share of it), by what
// this cluster's reservations among them may do; the rest (another
// cluster's, someone else's) are never touched.
type Holders struct {
	Live []*Reservation
	// Yieldable may have their release brought forward, oldest first.
	Yieldable []*Reservation
	// Releasing are inside their dead zone already.
	Releasing []*Reservation
	// NotYet are retained but may not yield yet: attached to a Load
	// Balancer being deleted, orphaned within the margin, or with a stale
	// release time the sweeper is to rewrite.
	NotYet []*Reservation
	// Settling belong to no live Service and are not retained yet: a
	// Service just deleted, or one being created.
	Settling []*Reservation
}

// Classify sorts what holds pool from a listing alone, so that a pool full
// of attached or just-deleted reservations costs no call per reservation.
// referenced holds the IDs a live Service references.
func (r Retention) Classify(cluster string, pool *Pool, all []*Reservation, referenced map[string]bool, now time.Time) Holders {
	var hs Holders
	for _, h := range all {
		if h.Cluster != cluster || h.ID == "" {
			continue
		}
		e := h.Entry
		switch {
		case referenced[h.ID]:
			hs.Live = append(hs.Live, h)
		case h.OrphanedSince.IsZero():
			hs.Settling = append(hs.Settling, h)
		case r.Releasing(pool, e, now):
			hs.Releasing = append(hs.Releasing, h)
		case h.Resource != nil || !r.Yieldable(pool, e, now):
			hs.NotYet = append(hs.NotYet, h)
		default:
			hs.Yieldable = append(hs.Yieldable, h)
		}
	}
	slices.SortFunc(hs.Yieldable, func(x, y *Reservation) int {
		return cmp.Or(x.OrphanedSince.Compare(y.OrphanedSince), x.Address.Compare(y.Address))
	})
	return hs
}

// Unsure finds, in a view of pool, this cluster's reservation the sweeper
// may have acted on since the view was listed: one no live Service
// references that it had not marked retained, or one whose release is
// due. One re-read of it (GetIP) is worth it before deciding, and no more:
// a CREATE in a full pool makes a constant number of calls whatever the
// subnet holds (DESIGN.md). The one due first is chosen, then the lowest
// address, so that replicas choose alike; ok is false when there is none.
func (r Retention) Unsure(cluster string, pool *Pool, all []*Reservation, referenced map[string]bool, now time.Time) (h *Reservation, ok bool) {
	due := func(x *Reservation) bool { return !x.OrphanedSince.IsZero() && r.Expired(pool, x.Entry, now) }
	for _, x := range all {
		// An attached one makes no room whatever its ledger says: its
		// re-read would be spent for nothing (a stranded one for ever).
		if x.Cluster != cluster || x.ID == "" || x.Resource != nil {
			continue
		}
		if !due(x) && !(x.OrphanedSince.IsZero() && !referenced[x.ID]) {
			continue
		}
		if !ok || firstUnsure(x, h, due) {
			h, ok = x, true
		}
	}
	return h, ok
}

// firstUnsure orders Unsure's candidates: due ones first, the earliest
// release first, then by address.
func firstUnsure(x, y *Reservation, due func(*Reservation) bool) bool {
	if dx, dy := due(x), due(y); dx != dy {
		return dx
	}
	if c := x.ReleaseAt.Compare(y.ReleaseAt); c != 0 {
		return c < 0
	}
	return x.Address.Less(y.Address)
}

// Yieldable reports whether a full pool may bring the release of a
// retained reservation forward at now: it is not already inside its
// dead zone (then it is being released anyway), and it was not orphaned
// within the last Margin, when the likeliest client is a re-create of
// the Service that just went away (a Helm upgrade, a replace) taking it
// back at this very moment. A pending booking (no Service ever showed
// it: no uid) does not yield for twice RetryAfter either: it is likely
// kept for a Service whose admission asked two full pools and is being
// retried, to take it back (see the webhook's reserve).
func (r Retention) Yieldable(p *Pool, e Entry, now time.Time) bool {
	quiet := r.Margin
	if e.UID == "" {
		quiet = max(quiet, 2*r.RetryAfter())
	}
	return !e.OrphanedSince.IsZero() && !now.Before(e.OrphanedSince.Add(quiet)) && r.Reusable(p, e, now)
}

// Yield is e with its release brought forward to Margin after now: every
// admission that reads it from now on finds it inside its dead zone.
func (r Retention) Yield(e Entry, now time.Time) Entry {
	e.ReleaseAt, e.Early = now.Add(r.Margin), true
	return e
}

// Full is a full pool, or a namespace's full share of one, and what holds
// it: the answer to a request that found no room.
type Full struct {
	// What and Among begin the refusal: "pool "x" is full", "of its 8
	// addresses".
	What, Among string
	Holders
	// RetryAfter and Margin are the release protocol's (Retention).
	RetryAfter, Margin time.Duration
}

// FullPool begins the refusal over a pool full of reservations, some of
// them retained: preflight knows the webhook's dry-run answer by it.
func FullPool(name string) string { return fmt.Sprintf("pool %q is full", name) }

// PoolFull is a full pool.
func (r Retention) PoolFull(p *Pool, hs Holders) Full {
	return Full{What: FullPool(p.Name), Among: fmt.Sprintf("of its %d addresses", p.Total()), Holders: hs, RetryAfter: r.RetryAfter(), Margin: r.Margin}
}

// ShareFull is a namespace holding its share n of a pool, held addresses.
func (r Retention) ShareFull(ns string, held, n int, p *Pool, hs Holders) Full {
	what := fmt.Sprintf("namespace %s holds %d/%d addresses of pool %q", ns, held, n, p.Name)
	return Full{What: what, Among: "of them", Holders: hs, RetryAfter: r.RetryAfter(), Margin: r.Margin}
}

// Decide answers a request in a full pool or share: a refusal, or the
// oldest retained reservation to bring forward (then Yielded or Changed
// words the answer), or neither when every address is in use by a live
// Service (the caller words that: AllInUse for a share). waiting is until
// when a release brought forward for this request is awaited, zero for
// none. A dry run brings nothing forward, and is not retryable: a client
// retrying a 429 would wait for a release that never comes.
func (f Full) Decide(dryRun bool, waiting, now time.Time) (refusal *Error, yield *Reservation) {
	n := len(f.Yieldable) + len(f.Releasing) + len(f.NotYet)
	if n+len(f.Settling) == 0 {
		return nil, nil
	}
	wait := seconds(f.RetryAfter)
	head := f.head()
	settling := fmt.Sprintf("%s; %d %s belong to no live Service and are not retained yet (just deleted, or being created)", f.What, len(f.Settling), f.Among)
	switch {
	case n == 0 && dryRun:
		return refuse(ReasonWouldYield, "%s; a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", settling, wait), nil
	case n == 0:
		return yielding(f.RetryAfter, "%s; nothing was reserved, retry in ~%s", settling, wait), nil
	case dryRun && len(f.Yieldable) > 0:
		h := f.Yieldable[0]
		return refuse(ReasonWouldYield, "%s; a CREATE would release the oldest (%s, of the deleted %s) early and ask to be retried in ~%s; nothing was changed (dry run)", head, h.Address, h.Service, wait), nil
	case dryRun && len(f.Releasing) == 0:
		return refuse(ReasonWouldYield, "%s, none of which may be released yet; a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", head, wait), nil
	case dryRun:
		return refuse(ReasonWouldYield, "%s and being released; a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", head, wait), nil
	case !waiting.IsZero():
		// A second at least: a release awaited since is due any moment.
		after := max(waiting.Sub(now), time.Second)
		return yielding(after, "%s; the oldest is being released for this Service; nothing was reserved, retry in ~%s", head, seconds(after)), nil
	case len(f.Yieldable) > 0:
		return nil, f.Yieldable[0]
	case len(f.Releasing) == 0:
		return yielding(f.RetryAfter, "%s, none of which may be released yet (deleted within the last %s, when a re-create may still take them back, or still attached to a Load Balancer being deleted); nothing was reserved, retry in ~%s", head, seconds(f.Margin), wait), nil
	}
	return yielding(f.RetryAfter, "%s and already being released; nothing was reserved, retry in ~%s", head, wait), nil
}

// Yielded answers once h's release was brought forward.
func (f Full) Yielded(h *Reservation) *Error {
	return yielding(f.RetryAfter, "%s; the oldest (%s, of the deleted %s) is being released; nothing was reserved, retry in ~%s", f.head(), h.Address, h.Service, seconds(f.RetryAfter))
}

// Changed answers when h changed since the listing (taken back, attached):
// the retry chooses again.
func (f Full) Changed(h *Reservation) *Error {
	return yielding(time.Second, "%s; the oldest (%s) changed since the pool was listed; nothing was reserved, retry in a moment", f.head(), h.Address)
}

func (f Full) head() string {
	n := len(f.Yieldable) + len(f.Releasing) + len(f.NotYet)
	return fmt.Sprintf("%s; %d %s are retained for deleted Services", f.What, n, f.Among)
}

// AllInUse refuses a share whose every address a live Service uses.
func (f Full) AllInUse() *Error {
	return refuse(ReasonShareExhausted, "%s, all used by its live Services: %s; delete one of them or ask for another pool", f.What, services(f.Live))
}

// OutOfTime answers a request whose deadline ran out while it made room.
func OutOfTime(p *Pool) *Error {
	return yielding(time.Second, "pool %q is full and the admission's deadline ran out while it made room; nothing was reserved, retry in a moment", p.Name)
}

// ShareRace answers the newer of two bookings that both found the last
// address of a namespace's share: it gave its booking back.
func ShareRace(ns string, n int, p *Pool) *Error {
	return yielding(time.Second, "namespace %s reached its %d addresses of pool %q while this admission booked (another one booked at the same moment); nothing was reserved, retry", ns, n, p.Name)
}

// Within reports whether id is among the n oldest of rs: a reservation a
// namespace's share has room for, in every order of bookings.
func Within(rs []*Reservation, id string, n int) bool {
	i := slices.IndexFunc(rs, func(r *Reservation) bool { return r.ID == id })
	return i >= 0 && i < n
}

// InShare reports whether a listed reservation r counts against namespace ns's share
// of pool: cluster's, of that namespace, in the pool's address space.
func InShare(cluster, ns string, pool *Pool, r *Reservation) bool {
	return r.Owns(cluster) && r.JudgedNamespace() == ns && pool.Holds(r.SubnetID, r.Address)
}

func yielding(after time.Duration, format string, args ...any) *Error {
	return &Error{Reason: ReasonYielding, RetryAfter: max(after, time.Second), Message: fmt.Sprintf(format, args...)}
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%d s", int((d+time.Second-1)/time.Second))
}

// services names the Services holding addresses, sorted, at most ten.
func services(hs []*Reservation) string {
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
