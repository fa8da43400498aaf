package chaos

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
)

// created is a successful CREATE in an opted-in namespace: when the client
// sent it and the IDs the Service got.
type created struct {
	svc   string // ns/name
	start time.Time
	ids   []string
	// address asked for, if any: only a reservation of that address is
	// its to take back.
	address string
}

// history is one IP's life from the emulator's audit log.
type history struct {
	address          netip.Addr
	booked, released time.Time // released zero while it exists
	tags             []struct {
		at   time.Time
		tags []string
	}
	attach []struct {
		at       time.Time
		attached bool
	}
}

func (h *history) existsAt(t time.Time) bool {
	return !h.booked.After(t) && (h.released.IsZero() || h.released.After(t))
}

func (h *history) entryAt(t time.Time) (ipam.Entry, bool) {
	var tags []string
	for _, s := range h.tags {
		if !s.at.After(t) {
			tags = s.tags
		}
	}
	return ipam.ParseEntry(tags)
}

func (h *history) attachedAt(t time.Time) bool {
	on := false
	for _, a := range h.attach {
		if !a.at.After(t) {
			on = a.attached
		}
	}
	return on
}

func histories(audit []ipamtest.AuditEvent) map[string]*history {
	out := map[string]*history{}
	for _, ev := range audit {
		if ev.IPID == "" {
			continue
		}
		h := out[ev.IPID]
		if h == nil {
			h = &history{}
			out[ev.IPID] = h
		}
		switch ev.Kind {
		case ipamtest.AuditBook:
			h.booked, h.address = ev.Time, ev.Address
		case ipamtest.AuditRelease:
			h.released = ev.Time
			continue
		case ipamtest.AuditAttach, ipamtest.AuditDetach:
			h.attach = append(h.attach, struct {
				at       time.Time
				attached bool
			}{ev.Time, ev.Kind == ipamtest.AuditAttach})
			continue
		}
		h.tags = append(h.tags, struct {
			at   time.Time
			tags []string
		}{ev.Time, ev.Tags})
	}
	return out
}

// stickiness reports, over the run's successful creates, how many found an
// earlier reservation of their Service and pool in IPAM that the release
// protocol let them take back (not attached, outside the safety margin),
// and how many of those got a fresh IP instead: the reservation index and
// the Service cache of the replica that answered had not seen it. Those
// are split by what the earlier reservation was: pending (booked by the
// other replica for a CREATE that failed after its admission: no Service
// ever showed it), held by a Service that was created (its cache had not
// caught up), or still attached. The sweeper releases those after their
// retention; invariant 3 checks nothing is left.
func (r *run) stickiness() string {
	hist := histories(r.env.Emu.Audit())
	policy := ipam.Retention{PendingGrace: pendingGrace, Margin: 2 * 3 * time.Second}
	cfg, err := ipam.ParseConfig([]byte(r.env.PoolFile()))
	if err != nil {
		return "stickiness: " + err.Error()
	}
	r.mu.Lock()
	creates := slices.Clone(r.creates)
	r.mu.Unlock()
	// IDs some successful create handed to a Service: the Service cache of
	// every replica showed them.
	shown := map[string]bool{}
	for _, c := range creates {
		for _, id := range c.ids {
			shown[id] = true
		}
	}
	var reusable, reused, fresh, freshShown, heldFresh int
	for _, c := range creates {
		for _, id := range c.ids {
			h := hist[id]
			if h == nil {
				continue // bring-your-own: booked before the run
			}
			got, ok := h.entryAt(h.booked)
			if !ok || got.Service.String() != c.svc {
				continue
			}
			if h.booked.Before(c.start) {
				reusable++
				reused++
				continue
			}
			// Booked for this create: was an earlier one of the Service and
			// pool there to take back when the admission booked instead (a
			// client's retries can put that well after it sent the CREATE)?
			at := h.booked
			for other, oh := range hist {
				if other == id || !oh.existsAt(at) || !oh.booked.Before(c.start) {
					continue
				}
				e, ok := oh.entryAt(at)
				if !ok || e.Service != got.Service || e.Pool != got.Pool || !reusable(cfg, policy, e, at) ||
					(c.address != "" && oh.address.String() != c.address) {
					continue
				}
				reusable++
				switch {
				case oh.attachedAt(at):
					heldFresh++
				case shown[other]:
					freshShown++
					if os.Getenv("CHAOS_DEBUG") != "" {
						fmt.Printf("miss: %s sent %s, booked %s at %s; earlier %s: %s\n", c.svc, c.start.Format("15:04:05.000"), id, at.Format("15:04:05.000"), other, r.trail(other))
					}
				default:
					fresh++
				}
				break
			}
		}
	}
	return fmt.Sprintf("  stickiness: %d creates found an earlier reservation of their Service and pool to take back: %d took it back;\n"+
		"    fresh IP instead (the answering replica had not seen it): %d pending (booked by an admission whose CREATE failed),\n"+
		"    %d that a created Service had held, %d still attached to the previous Load Balancer\n",
		reusable, reused, fresh, freshShown, heldFresh)
}

// recordCreate keeps a successful create for stickiness.
func (r *run) recordCreate(ns, name string, start time.Time, ann map[string]string) {
	ids := ccm.ReferencedIDs(svcObject(ns, name, ann))
	if len(ids) == 0 || ns == "plain" {
		return
	}
	r.mu.Lock()
	r.creates = append(r.creates, created{svc: ns + "/" + name, start: start, ids: ids, address: ann[ccm.AnnotationAddress]})
	r.mu.Unlock()
}

// reusable is the admissions' reuse rule for a reservation the chaos run
// tags with pool names that never change.
func reusable(cfg *ipam.Config, policy ipam.Retention, e ipam.Entry, at time.Time) bool {
	p, _ := cfg.Pool(e.Pool)
	return policy.Reusable(p, e, at)
}
