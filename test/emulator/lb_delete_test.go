package emulator

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

// deletedLB is TestLBDeletionIsAsynchronous's Load Balancer old, attached
// to pool with a reserved IP and to nodes by DHCP, and the successor that
// takes the reserved IP once old is gone.
type deletedLB struct {
	srv              *Server
	c                clients
	old, successor   *lb.LB
	pool             PrivateNetwork
	reserved, dhcpID string
}

func newDeletedLB(t *testing.T, srv *Server, c clients) deletedLB {
	t.Helper()
	d := deletedLB{srv: srv, c: c}
	d.pool = mustPN(t, srv, "pool", "10.1.0.0/24")
	nodes := mustPN(t, srv, "nodes", "10.2.0.0/24")
	d.reserved = mustAddIP(t, srv, d.pool.ID, "10.1.0.9", []string{"keep"}, nil)
	d.old = mustLB(t, c, "old")
	if _, err := attach(c, d.old.ID, d.pool.ID, d.reserved); err != nil {
		t.Fatal(err)
	}
	att, err := attach(c, d.old.ID, nodes.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.dhcpID = att.IpamIDs[0]
	d.successor = mustLB(t, c, "successor")
	return d
}

// TestLBDeletionIsAsynchronous: DeleteLB is accepted at once, then the Load
// Balancer stays to_delete for LBDeleteDelay — got, listed, its networks
// and their IPs still attached, no change accepted — and only then is it
// gone, with the same end state as a synchronous deletion.
func TestLBDeletionIsAsynchronous(t *testing.T) {
	const delay = time.Second
	srv, c := setup(t, func(o *Options) { o.LBDeleteDelay = delay })
	d := newDeletedLB(t, srv, c)

	start := time.Now()
	if err := c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: d.old.ID}); err != nil {
		t.Fatal(err)
	}
	// The window: everything below must run well within the delay.
	d.wantWindow(t)
	if elapsed := time.Since(start); elapsed >= delay {
		t.Fatalf("the checks of the window took %s, longer than the delay: raise it", elapsed)
	}

	// Then it is gone: the end state of a synchronous deletion.
	var err error
	for {
		_, err = c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: d.old.ID})
		if err != nil || time.Since(start) > delay+5*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if gone := time.Since(start); gone < delay {
		t.Fatalf("gone after %s, before the delay of %s", gone, delay)
	}
	wantLBNotFound(t, err, "lbs")
	d.wantGone(t)

	// Its history: the deletion accepted, nothing detached before it,
	// then its networks detached (as the DeleteLB's doing) and its end.
	d.wantHistory(t, delay)
}

// wantWindow checks the window after DeleteLB: old is got and listed
// to_delete, its networks and their IPs still attached, no change of it
// accepted, and its reserved IP still its own.
func (d deletedLB) wantWindow(t *testing.T) {
	t.Helper()
	got, err := d.c.lb.GetLB(&lb.ZonedAPIGetLBRequest{LBID: d.old.ID})
	if err != nil || got.Status != lb.LBStatusToDelete || got.PrivateNetworkCount != 2 {
		t.Fatalf("GetLB right after DeleteLB: %+v, %v", got, err)
	}
	list, err := d.c.lb.ListLBs(&lb.ZonedAPIListLBsRequest{}, scw.WithAllPages())
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]lb.LBStatus{}
	for _, l := range list.LBs {
		statuses[l.ID] = l.Status
	}
	if len(statuses) != 2 || statuses[d.old.ID] != lb.LBStatusToDelete || statuses[d.successor.ID] != lb.LBStatusReady {
		t.Fatalf("ListLBs statuses %v", statuses)
	}
	if pns := lbPNs(t, d.c, d.old.ID); len(pns) != 2 {
		t.Fatalf("private networks while to_delete: %+v", pns)
	}
	wantLBResource(t, mustGetIP(t, d.c, d.reserved), d.old)
	wantLBResource(t, mustGetIP(t, d.c, d.dhcpID), d.old)
	if snap := d.srv.LBs(); len(snap) != 2 || snap[0].Status != "to_delete" || snap[0].PrivateNetworks[d.pool.ID] != d.reserved {
		t.Fatalf("LBs() %+v", snap)
	}
	// No change of a Load Balancer being deleted, deleting it again
	// included.
	wantToDelete(t, detach(d.c, d.old.ID, d.pool.ID), d.old.ID)
	other := mustPN(t, d.srv, "other", "10.3.0.0/24")
	_, err = attach(d.c, d.old.ID, other.ID)
	wantToDelete(t, err, d.old.ID)
	wantToDelete(t, d.c.lb.DeleteLB(&lb.ZonedAPIDeleteLBRequest{LBID: d.old.ID}), d.old.ID)
	// Its reserved IP is still its own: another Load Balancer cannot have it.
	_, err = attach(d.c, d.successor.ID, d.pool.ID, d.reserved)
	wantResponseError(t, err, 409, "already_exists")
}

// wantGone checks the end state once old is gone: its reserved IP kept,
// detached, and free for the successor; its DHCP IP released.
func (d deletedLB) wantGone(t *testing.T) {
	t.Helper()
	ip := mustGetIP(t, d.c, d.reserved)
	if ip.Resource != nil || !slices.Equal(ip.Tags, []string{"keep"}) {
		t.Fatalf("reserved IP after the deletion: %+v %v", ip.Resource, ip.Tags)
	}
	_, err := d.c.ipam.GetIP(&ipam.GetIPRequest{IPID: d.dhcpID})
	errAs[*scw.ResourceNotFoundError](t, err)
	if snap := d.srv.LBs(); len(snap) != 1 || snap[0].ID != d.successor.ID {
		t.Fatalf("LBs() after the deletion %+v", snap)
	}
	if _, err := attach(d.c, d.successor.ID, d.pool.ID, d.reserved); err != nil {
		t.Fatalf("the reserved IP after its Load Balancer went: %v", err)
	}
}

// wantHistory checks old's audit: the deletion accepted, its networks
// detached by DeleteLB at least delay later, then its end; and the
// successor's, which starts with its own attach of the reserved IP.
func (d deletedLB) wantHistory(t *testing.T, delay time.Duration) {
	t.Helper()
	var kinds []string
	var accepted, gone time.Time
	for _, ev := range d.srv.LBAudit(d.old.ID) {
		kinds = append(kinds, string(ev.Kind)+":"+ev.IPID)
		switch ev.Kind {
		case AuditDeleteLB:
			accepted = ev.Time
		case AuditLBGone:
			gone = ev.Time
		case AuditDetach, AuditRelease:
			if ev.Op != OpDeleteLB || ev.LBID != d.old.ID {
				t.Fatalf("teardown event %+v", ev)
			}
		}
	}
	want := []string{"create_lb:", "attach:" + d.reserved, "book:" + d.dhcpID, "attach:" + d.dhcpID, "delete_lb:",
		"detach:" + d.reserved, "detach:" + d.dhcpID, "release:" + d.dhcpID, "lb_gone:"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("LBAudit %v, want %v", kinds, want)
	}
	if gone.Sub(accepted) < delay {
		t.Fatalf("to_delete for %s, want at least %s", gone.Sub(accepted), delay)
	}
	// The successor's history starts with its own attach of the IP.
	if got := d.srv.LBAudit(d.successor.ID); len(got) != 2 || got[1].Kind != AuditAttach || got[1].IPID != d.reserved {
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
