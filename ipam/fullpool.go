package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Held is one booked address of a pool, as the ledger describes it.
type Held struct {
	Addr netip.Addr
	Holder
}

// HeldOf describes listed IPs.
func HeldOf(ips []*scaleway.IP) []Held {
	out := make([]Held, len(ips))
	for i, ip := range ips {
		out[i] = Held{Addr: ip.Address, Holder: HolderOf(ip)}
	}
	return out
}

// Holders is what holds a full pool (or a namespace's share of it), by what
// this cluster's reservations among them may do; the rest (another
// cluster's, someone else's) are never touched.
type Holders struct {
	Live []Held
	// Yieldable may have their release brought forward, oldest first.
	Yieldable []Held
	// Releasing are inside their dead zone already.
	Releasing []Held
	// NotYet are retained but may not yield yet: attached to a Load
	// Balancer being deleted, orphaned within the margin, or with a stale
	// release time the sweeper is to rewrite.
	NotYet []Held
	// Settling belong to no live Service and are not retained yet: a
	// Service just deleted, or one being created.
	Settling []Held
}

// Classify sorts what holds pool from a listing alone, so that a pool full
// of attached or just-deleted reservations costs no call per reservation.
// referenced holds the IDs a live Service references.
func (r Retention) Classify(cluster string, pool *Pool, all []Held, referenced map[string]bool, now time.Time) Holders {
	var hs Holders
	for _, h := range all {
		if h.Cluster != cluster || h.IPID == "" {
			continue
		}
		e := h.Entry
		switch {
		case referenced[h.IPID]:
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
	slices.SortFunc(hs.Yieldable, func(x, y Held) int {
		return cmp.Or(x.OrphanedSince.Compare(y.OrphanedSince), x.Addr.Compare(y.Addr))
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
func (r Retention) Unsure(cluster string, pool *Pool, all []Held, referenced map[string]bool, now time.Time) (h Held, ok bool) {
	due := func(x Held) bool { return !x.OrphanedSince.IsZero() && r.Expired(pool, x.Entry, now) }
	for _, x := range all {
		// An attached one makes no room whatever its ledger says: its
		// re-read would be spent for nothing (a stranded one for ever).
		if x.Cluster != cluster || x.IPID == "" || x.Resource != nil {
			continue
		}
		if !due(x) && !(x.OrphanedSince.IsZero() && !referenced[x.IPID]) {
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
func firstUnsure(x, y Held, due func(Held) bool) bool {
	if dx, dy := due(x), due(y); dx != dy {
		return dx
	}
	if c := x.ReleaseAt.Compare(y.ReleaseAt); c != 0 {
		return c < 0
	}
	return x.Addr.Less(y.Addr)
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
func (f Full) Decide(dryRun bool, waiting, now time.Time) (refusal *Error, yield *Held) {
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
		return refuse(ReasonWouldYield, "%s; a CREATE would release the oldest (%s, of the deleted %s) early and ask to be retried in ~%s; nothing was changed (dry run)", head, h.Addr, h.Service, wait), nil
	case dryRun && len(f.Releasing) == 0:
		return refuse(ReasonWouldYield, "%s, none of which may be released yet; a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", head, wait), nil
	case dryRun:
		return refuse(ReasonWouldYield, "%s and being released; a CREATE would be asked to retry in ~%s; nothing was changed (dry run)", head, wait), nil
	case !waiting.IsZero():
		// A second at least: a release awaited since is due any moment.
		after := max(waiting.Sub(now), time.Second)
		return yielding(after, "%s; the oldest is being released for this Service; nothing was reserved, retry in ~%s", head, seconds(after)), nil
	case len(f.Yieldable) > 0:
		return nil, &f.Yieldable[0]
	case len(f.Releasing) == 0:
		return yielding(f.RetryAfter, "%s, none of which may be released yet (deleted within the last %s, when a re-create may still take them back, or still attached to a Load Balancer being deleted); nothing was reserved, retry in ~%s", head, seconds(f.Margin), wait), nil
	}
	return yielding(f.RetryAfter, "%s and already being released; nothing was reserved, retry in ~%s", head, wait), nil
}

// Yielded answers once h's release was brought forward.
func (f Full) Yielded(h Held) *Error {
	return yielding(f.RetryAfter, "%s; the oldest (%s, of the deleted %s) is being released; nothing was reserved, retry in ~%s", f.head(), h.Addr, h.Service, seconds(f.RetryAfter))
}

// Changed answers when h changed since the listing (taken back, attached):
// the retry chooses again.
func (f Full) Changed(h Held) *Error {
	return yielding(time.Second, "%s; the oldest (%s) changed since the pool was listed; nothing was reserved, retry in a moment", f.head(), h.Addr)
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

// Within reports whether id is among the n oldest of ips: a reservation a
// namespace's share has room for, in every order of bookings.
func Within(ips []*scaleway.IP, id string, n int) bool {
	i := slices.IndexFunc(ips, func(ip *scaleway.IP) bool { return ip.ID == id })
	return i >= 0 && i < n
}

// InShare reports whether a listed ip counts against namespace ns's share
// of pool: cluster's, of that namespace, in the pool's address space.
func InShare(cluster, ns string, pool *Pool, ip *scaleway.IP) bool {
	e, ok := ParseEntry(ip.Tags)
	return ok && e.Owns(cluster) && e.ShareNamespace() == ns && pool.Holds(ip.SubnetID, ip.Address)
}

func yielding(after time.Duration, format string, args ...any) *Error {
	return &Error{Reason: ReasonYielding, RetryAfter: max(after, time.Second), Message: fmt.Sprintf(format, args...)}
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%d s", int((d+time.Second-1)/time.Second))
}

// services names the Services holding addresses, sorted, at most ten.
func services(hs []Held) string {
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
