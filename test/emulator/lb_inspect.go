package emulator

import (
	"fmt"
	"slices"
	"sync"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
)

// --- Go API: what tests read of Load Balancers, and held deletions ---

// LBs is a snapshot of every Load Balancer, oldest first.
func (api *lbAPI) LBs() []LB {
	api.mu.RLock()
	defer api.mu.RUnlock()
	lbs := make([]*lbRec, 0, len(api.st.lbs))
	for _, lb := range api.st.lbs {
		lbs = append(lbs, lb)
	}
	byCreated, _ := nameOrder("")
	slices.SortFunc(lbs, func(a, b *lbRec) int {
		return byCreated(namedItem{a.name, a.createdAt, a.seq}, namedItem{b.name, b.createdAt, b.seq})
	})
	out := make([]LB, len(lbs))
	now := api.now()
	for i, lb := range lbs {
		pns := make(map[string]string, len(lb.pns))
		for _, lp := range lb.pns {
			if lp.goneAt.IsZero() {
				pns[lp.pn.id] = lp.ip.id
			}
		}
		var flex []string
		for _, ip := range lb.flexIPs {
			flex = append(flex, ip.addr.String())
		}
		out[i] = LB{
			ID: lb.id, Name: lb.name, Zone: lb.zone, ProjectID: lb.projectID, Status: lb.statusAt(now),
			Tags: nonNil(lb.tags), PrivateNetworks: pns, FlexibleIPs: flex,
			Frontends: len(lb.frontends), Backends: len(lb.backends),
		}
	}
	return out
}

// HoldLBDeletion keeps Load Balancer id to_delete once its deletion is
// accepted, however long past LBDeleteDelay, until release is called: a
// previous Load Balancer that never finishes deleting keeps its IPs
// attached. It errors when there is no such Load Balancer or it is held
// already; call it before the deletion could have finished.
func (api *lbAPI) HoldLBDeletion(id string) (release func(), err error) {
	api.mu.Lock()
	defer api.mu.Unlock()
	lb := api.st.lbs[id]
	switch {
	case lb == nil:
		return nil, fmt.Errorf("emulator: no Load Balancer %s to hold", id)
	case lb.held != nil:
		return nil, fmt.Errorf("emulator: the deletion of Load Balancer %s is held already", id)
	}
	held := make(chan struct{})
	lb.held = held
	var once sync.Once
	return func() {
		once.Do(func() {
			api.mu.Lock()
			defer api.mu.Unlock()
			lb.held = nil
			close(held)
		})
	}, nil
}

// LBAudit is the part of the audit log about Load Balancer lbID, oldest
// first: its creation, deletion and end, and every IP attached to or
// detached from it, whoever made the change (its own API calls, or the Go
// API on an IP attached to it). A test checks from it that a live Load
// Balancer never changed address: no detach before its AuditDeleteLB.
func (api *lbAPI) LBAudit(lbID string) []AuditEvent {
	var out []AuditEvent
	for _, ev := range api.Audit() {
		if ev.LBID == lbID || (ev.Resource != nil && ev.Resource.Type == string(ipam.ResourceTypeLBServer) && ev.Resource.ID == lbID) {
			out = append(out, ev)
		}
	}
	return out
}
