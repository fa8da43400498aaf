package scalewaytest

import (
	"slices"
	"testing"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lb "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

// wantToDelete checks that err is the refusal of a change of Load Balancer
// id while it is being deleted.
func wantToDelete(t *testing.T, err error, id string) {
	t.Helper()
	if ts := errAs[*scw.TransientStateError](t, err); ts.Resource != "lb" || ts.ResourceID != id || ts.CurrentState != "to_delete" {
		t.Fatalf("%+v", ts)
	}
}

// TestLBDeletionIsAsynchronous: DeleteLB is accepted at once, then the Load
// Balancer stays to_delete for LBDeleteDelay — got, listed, its networks
// and their IPs still attached, no change accepted — and only then is it
// gone, with the same end state as a synchronous deletion.
func TestLBDeletionIsAsynchronous(t *testing.T) {
	const delay = time.Second
	srv, c := setup(t, func(o *Options) { o.LBDeleteDelay = delay })
	pool := mustPN(t, srv, "pool", "10.1.0.0/24")
	nodes := mustPN(t, srv, "nodes", "10.2.0.0/24")
	reserved := mustAddIP(t, srv, pool.ID, "10.1.0.9", []string{"keep"}, nil)
	old := mustLB(t, c, "old")
	if _, err := attach(c, old.ID, pool.ID, reserved); err != nil {
		t.Fatal(err)
	}
	att, err := attach(c, old.ID, nodes.ID)
	if err != nil {
		t.Fatal(err)
	}
	dhcpID := att.IpamIDs[0]
	successor := mustLB(t, c, "successor")

	start := time.Now()
	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: old.ID}); err != nil {
		t.Fatal(err)
	}
	// The window: everything below must run well within the delay.
	got, err := c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: old.ID})
	if err != nil || got.Status != lb.LBStatusToDelete || got.PrivateNetworkCount != 2 {
		t.Fatalf("GetLB right after DeleteLB: %+v, %v", got, err)
	}
	list, err := c.lb.ListLBs(&lb.ZonedAPIListLBsRequest{}, scw.WithAllPages())
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]lb.LBStatus{}
	for _, l := range list.LBs {
		statuses[l.ID] = l.Status
	}
	if len(statuses) != 2 || statuses[old.ID] != lb.LBStatusToDelete || statuses[successor.ID] != lb.LBStatusReady {
		t.Fatalf("ListLBs statuses %v", statuses)
	}
	if pns := lbPNs(t, c, old.ID); len(pns) != 2 {
		t.Fatalf("private networks while to_delete: %+v", pns)
	}
	wantLBResource(t, mustGetIP(t, c, reserved), old)
	wantLBResource(t, mustGetIP(t, c, dhcpID), old)
	if snap := srv.LBs(); len(snap) != 2 || snap[0].Status != "to_delete" || snap[0].PrivateNetworks[pool.ID] != reserved {
		t.Fatalf("LBs() %+v", snap)
	}
	// No change of a Load Balancer being deleted, deleting it again
	// included.
	wantToDelete(t, detach(c, old.ID, pool.ID), old.ID)
	other := mustPN(t, srv, "other", "10.3.0.0/24")
	_, err = attach(c, old.ID, other.ID)
	wantToDelete(t, err, old.ID)
	wantToDelete(t, c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: old.ID}), old.ID)
	// Its reserved IP is still its own: another Load Balancer cannot have it.
	_, err = attach(c, successor.ID, pool.ID, reserved)
	wantResponseError(t, err, 409, "already_exists")
	if elapsed := time.Since(start); elapsed >= delay {
		t.Fatalf("the checks of the window took %s, longer than the delay: raise it", elapsed)
	}

	// Then it is gone: the end state of a synchronous deletion.
	for {
		_, err = c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: old.ID})
		if err != nil || time.Since(start) > delay+5*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if gone := time.Since(start); gone < delay {
		t.Fatalf("gone after %s, before the delay of %s", gone, delay)
	}
	wantLBNotFound(t, err, "lbs")
	ip := mustGetIP(t, c, reserved)
	if ip.Resource != nil || !slices.Equal(ip.Tags, []string{"keep"}) {
		t.Fatalf("reserved IP after the deletion: %+v %v", ip.Resource, ip.Tags)
	}
	_, err = c.ipam.GetIP(&ipam.GetIPRequest{IPID: dhcpID})
	errAs[*scw.ResourceNotFoundError](t, err)
	if snap := srv.LBs(); len(snap) != 1 || snap[0].ID != successor.ID {
		t.Fatalf("LBs() after the deletion %+v", snap)
	}
	if _, err := attach(c, successor.ID, pool.ID, reserved); err != nil {
		t.Fatalf("the reserved IP after its Load Balancer went: %v", err)
	}

	// Its history: the deletion accepted, nothing detached before it,
	// then its networks detached (as the DeleteLB's doing) and its end.
	var kinds []string
	var accepted, gone time.Time
	for _, ev := range srv.LBAudit(old.ID) {
		kinds = append(kinds, string(ev.Kind)+":"+ev.IPID)
		switch ev.Kind {
		case AuditDeleteLB:
			accepted = ev.Time
		case AuditLBGone:
			gone = ev.Time
		case AuditDetach, AuditRelease:
			if ev.Op != OpDeleteLB || ev.LBID != old.ID {
				t.Fatalf("teardown event %+v", ev)
			}
		}
	}
	want := []string{"create_lb:", "attach:" + reserved, "book:" + dhcpID, "attach:" + dhcpID, "delete_lb:",
		"detach:" + reserved, "detach:" + dhcpID, "release:" + dhcpID, "lb_gone:"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("LBAudit %v, want %v", kinds, want)
	}
	if gone.Sub(accepted) < delay {
		t.Fatalf("to_delete for %s, want at least %s", gone.Sub(accepted), delay)
	}
	// The successor's history starts with its own attach of the IP.
	if got := srv.LBAudit(successor.ID); len(got) != 2 || got[1].Kind != AuditAttach || got[1].IPID != reserved {
		t.Fatalf("successor's LBAudit %+v", got)
	}
}

// TestLBAuditSeesGoAPIDetaches: an IP of a Load Balancer detached through
// the Go API is part of that Load Balancer's history, although no call of
// its own made the change.
func TestLBAuditSeesGoAPIDetaches(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "pool", "10.1.0.0/24")
	id := mustAddIP(t, srv, pn.ID, "10.1.0.9", nil, nil)
	l := mustLB(t, c, "web")
	if _, err := attach(c, l.ID, pn.ID, id); err != nil {
		t.Fatal(err)
	}
	if err := srv.Detach(id); err != nil {
		t.Fatal(err)
	}
	evs := srv.LBAudit(l.ID)
	if len(evs) != 3 || evs[2].Kind != AuditDetach || evs[2].LBID != "" || evs[2].Op != "" {
		t.Fatalf("LBAudit %+v", evs)
	}
}

// TestCloseDropsPendingLBDeletions: a Load Balancer still to_delete when the
// emulator closes stays so: the removal's timer ends with the server.
func TestCloseDropsPendingLBDeletions(t *testing.T) {
	srv, c := setup(t, func(o *Options) { o.LBDeleteDelay = 300 * time.Millisecond })
	l := mustLB(t, c, "doomed")
	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: l.ID}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if snap := srv.LBs(); len(snap) != 1 || snap[0].Status != "to_delete" {
		t.Fatalf("LBs() after Close %+v", snap)
	}
}

// TestHeldLBDeletionWaitsForRelease: a held Load Balancer stays to_delete,
// its reserved IP attached, well past LBDeleteDelay (none here: it would
// be gone at once), and goes as soon as the hold is released. Another Load
// Balancer's deletion is not held; a second hold of the same one is
// refused.
func TestHeldLBDeletionWaitsForRelease(t *testing.T) {
	srv, c := setup(t)
	pool := mustPN(t, srv, "pool", "10.1.0.0/24")
	reserved := mustAddIP(t, srv, pool.ID, "10.1.0.9", nil, nil)
	stuck, other := mustLB(t, c, "stuck"), mustLB(t, c, "other")
	if _, err := attach(c, stuck.ID, pool.ID, reserved); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.HoldLBDeletion("nope"); err == nil {
		t.Fatal("held a Load Balancer that does not exist")
	}
	release, err := srv.HoldLBDeletion(stuck.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.HoldLBDeletion(stuck.ID); err == nil {
		t.Fatal("held the same Load Balancer twice")
	}
	for _, id := range []string{stuck.ID, other.ID} {
		if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: id}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if snap := srv.LBs(); len(snap) != 1 || snap[0].ID != stuck.ID || snap[0].Status != "to_delete" || snap[0].PrivateNetworks[pool.ID] != reserved {
		t.Fatalf("LBs() while held %+v", snap)
	}
	wantLBResource(t, mustGetIP(t, c, reserved), stuck)

	release()
	release() // a second call is harmless
	for deadline := time.Now().Add(5 * time.Second); len(srv.LBs()) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("LBs() 5s after the release %+v", srv.LBs())
		}
	}
	if ip := mustGetIP(t, c, reserved); ip.Resource != nil {
		t.Fatalf("reserved IP still attached to %+v once its Load Balancer went", ip.Resource)
	}
}
