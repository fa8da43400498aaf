package emulator

import (
	"net/netip"
	"slices"
	"time"
)

// AuditKind is the kind of a state change.
type AuditKind string

// The state changes the audit log records.
const (
	AuditBook    AuditKind = "book"
	AuditRelease AuditKind = "release"
	AuditTags    AuditKind = "tags"
	AuditAttach  AuditKind = "attach"
	AuditDetach  AuditKind = "detach"
	// A Load Balancer was created, its deletion accepted (DeleteLB; it is
	// to_delete from then on), or it is gone (Options.LBDeleteDelay after
	// its deletion, at once without a delay): these events are about no IP
	// (IPID, Address, SubnetID and PrivateNetworkID are empty); LBID names
	// it. Before AuditLBGone come the detach (and release) events of its
	// Private Networks, with Op DeleteLB.
	AuditCreateLB AuditKind = "create_lb"
	AuditDeleteLB AuditKind = "delete_lb"
	AuditLBGone   AuditKind = "lb_gone"
)

// AuditEvent is one change of an IP's state, or of a Load Balancer's
// existence (AuditCreateLB, AuditDeleteLB, AuditLBGone).
type AuditEvent struct {
	Time             time.Time
	Kind             AuditKind
	IPID             string
	Address          netip.Addr
	SubnetID         string
	PrivateNetworkID string
	// Tags of the IP after the change.
	Tags []string
	// Resource attached (attach) or detached (detach).
	Resource *Resource
	// Op is the HTTP operation that made the change, also when it came
	// later (the detaches of a Load Balancer deleted with a delay); "" for
	// the Go API (AddIP, Attach, Detach).
	Op Op
	// LBID is the Load Balancer whose API call made the change (the IP it
	// was given or lost on a Private Network), or the one created or
	// deleted; "" for changes made through IPAM or the Go API.
	LBID string
	// AnswerLost: the change was made but the client was answered an error
	// or nothing (Fault.CommitThenFail).
	AnswerLost bool
}

// auditLocked records a change of ip; cl.mu is held.
func (cl *cloud) auditLocked(c *call, kind AuditKind, ip *ipRecord, res *attachment, now time.Time) {
	ev := AuditEvent{
		Time: now, Kind: kind, IPID: ip.id, Address: ip.addr,
		SubnetID: ip.subnet.id, PrivateNetworkID: ip.subnet.pn.id,
		Tags: slices.Clone(ip.tags),
	}
	if res != nil {
		r := res.public()
		ev.Resource = &r
	}
	if c != nil {
		ev.Op, ev.AnswerLost, ev.LBID = c.op, c.lost, c.lbID
	}
	cl.st.audit = append(cl.st.audit, ev)
}

// auditLBLocked records the creation or deletion of a Load Balancer; cl.mu
// is held.
func (cl *cloud) auditLBLocked(c *call, kind AuditKind, lbID string, now time.Time) {
	ev := AuditEvent{Time: now, Kind: kind, LBID: lbID}
	if c != nil {
		ev.Op, ev.AnswerLost = c.op, c.lost
	}
	cl.st.audit = append(cl.st.audit, ev)
}

// Audit is a copy of the audit log, oldest first.
func (cl *cloud) Audit() []AuditEvent {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	out := make([]AuditEvent, len(cl.st.audit))
	for i, ev := range cl.st.audit {
		ev.Tags = slices.Clone(ev.Tags)
		if ev.Resource != nil {
			r := *ev.Resource
			ev.Resource = &r
		}
		out[i] = ev
	}
	return out
}
