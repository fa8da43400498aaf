package emulator

import (
	"time"
)

// A frontend and a backend are children of one Load Balancer: their calls
// find, list and guard them the same way, and differ only in the kind's
// name, its records and its JSON.
type lbChild interface {
	owner() *lbRec
	name() string
}

func (f *frontendRec) owner() *lbRec { return f.lb }
func (f *frontendRec) name() string  { return f.settings.Name }
func (b *backendRec) owner() *lbRec  { return b.lb }
func (b *backendRec) name() string   { return b.settings.Name }

// childLocked is the child of kind of the path, among recs; with
// changeable, refused while its Load Balancer is not ready.
func childLocked[R lbChild](cl *cloud, recs map[string]R, c *call, kind string, changeable bool) (R, *apiError) {
	var none R
	r, ok := recs[c.id]
	if !ok || r.owner().zone != c.zone {
		return none, lbNotFound(kind, c.id)
	}
	if changeable {
		if aerr := cl.changeableLocked(r.owner()); aerr != nil {
			return none, aerr
		}
	}
	return r, nil
}

// listChildren answers the list of the path's Load Balancer's children of
// kind (of), with the name filter and paging, each as toJSON renders it,
// under kind+"s" beside total_count.
func listChildren[R lbChild, J any](cl *cloud, c *call, kind string, of func(*lbRec) []R, toJSON func(R) J) reply {
	page, size, aerr := paging(c.query)
	if aerr != nil {
		return aerr.reply()
	}
	name := optString(c.query, "name")
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	lb, aerr := cl.lbOfLocked(c.zone, c.id)
	if aerr != nil {
		return aerr.reply()
	}
	var rs []R
	for _, r := range of(lb) {
		if name == nil || containsFold(r.name(), *name) {
			rs = append(rs, r)
		}
	}
	lo, hi := window(page, size, len(rs))
	items := []J{}
	for _, r := range rs[lo:hi] {
		items = append(items, toJSON(r))
	}
	return ok(map[string]any{kind + "s": items, "total_count": len(rs)})
}

// changeChild runs change on the path's child of kind, under the emulator's
// lock and refused while its Load Balancer is not ready; a change that
// succeeds leaves that Load Balancer settling, as Scaleway's does, before
// its answer is rendered.
func changeChild[R lbChild](cl *cloud, recs map[string]R, c *call, kind string, change func(r R, now time.Time) (answer func() any, aerr *apiError)) reply {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	r, aerr := childLocked(cl, recs, c, kind, true)
	if aerr != nil {
		return aerr.reply()
	}
	now := cl.now()
	answer, aerr := change(r, now)
	if aerr != nil {
		return aerr.reply()
	}
	r.owner().touch(now, cl.opts.LBSettleDelay)
	return ok(answer())
}
