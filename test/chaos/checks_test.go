package chaos

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// The checks of invariants 7 and 8 on hand-made audit logs: a check that
// cannot fail proves nothing.

const (
	lbID, svcUID     = "lb-1", "uid-1"
	dcPN, nodesPN    = "pn-dc", "pn-nodes"
	idA, idB, idNode = "ip-a", "ip-b", "ip-node"
	idP              = "ip-p" // a pending booking
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func lbEvent(kind emulator.AuditKind, d time.Duration) emulator.AuditEvent {
	op := emulator.OpDeleteLB
	if kind == emulator.AuditCreateLB {
		op = emulator.OpCreateLB
	}
	return emulator.AuditEvent{Time: at(d), Kind: kind, LBID: lbID, Op: op}
}

// ipEvent is an attach or detach of ip on pn by the Load Balancer API.
func ipEvent(kind emulator.AuditKind, d time.Duration, ip, pn string) emulator.AuditEvent {
	return emulator.AuditEvent{Time: at(d), Kind: kind, IPID: ip, Address: netip.MustParseAddr("172.16.35.9"), PrivateNetworkID: pn,
		LBID: lbID, Resource: &emulator.Resource{Type: "lb_server", ID: lbID, Name: svcUID}}
}

func TestLiveAddressesCheck(t *testing.T) {
	created := []emulator.AuditEvent{
		lbEvent(emulator.AuditCreateLB, 0),
		ipEvent(emulator.AuditAttach, time.Second, idNode, nodesPN),
		ipEvent(emulator.AuditAttach, time.Second, idA, dcPN),
	}
	deleted := []emulator.AuditEvent{
		lbEvent(emulator.AuditDeleteLB, 30*time.Second),
		// Its end, 6 s later: not a live Load Balancer's change.
		ipEvent(emulator.AuditDetach, 36*time.Second, idNode, nodesPN),
		ipEvent(emulator.AuditDetach, 36*time.Second, idA, dcPN),
		lbEvent(emulator.AuditLBGone, 36*time.Second),
	}
	moveToB := allowedMove{at: at(2 * time.Second), ids: map[string]bool{idB: true}}
	for _, tc := range []struct {
		name    string
		events  []emulator.AuditEvent
		allowed []allowedMove
		bad     string // in the only violation; "" for none
		moves   int
	}{
		{name: "attached once, deleted", events: concat(created, deleted)},
		{
			name:   "the pool's network detached and attached again with the same ID (a re-apply dropped it from pn-ids)",
			events: concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 5*time.Second, idA, dcPN), ipEvent(emulator.AuditAttach, 6*time.Second, idA, dcPN)}, deleted),
			bad:    "lost ip-a (172.16.35.9) on network dc at 10:00:05.000 with no allow-ip-change write asking for it, attached again with the same ID 1s later",
		},
		{
			name:   "detached for good",
			events: concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 5*time.Second, idA, dcPN)}, deleted),
			bad:    "nothing attached there again before its deletion at 10:00:30.000",
		},
		{
			name:    "moved as an allow-ip-change write asked",
			events:  concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 5*time.Second, idA, dcPN), ipEvent(emulator.AuditAttach, 6*time.Second, idB, dcPN)}, deleted),
			allowed: []allowedMove{moveToB},
			moves:   2,
		},
		{
			name:    "moved back to an address the allow-ip-change write did not ask for",
			events:  concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 5*time.Second, idA, dcPN), ipEvent(emulator.AuditAttach, 6*time.Second, idA, dcPN)}, deleted),
			allowed: []allowedMove{moveToB},
			moves:   1,
			bad:     "got ip-a (172.16.35.9) on network dc at 10:00:06.000, after [] there, and no allow-ip-change write asked for it",
		},
		{
			name:    "an allow-ip-change write that came after the change",
			events:  concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 5*time.Second, idA, dcPN)}, deleted),
			allowed: []allowedMove{{at: at(5500 * time.Millisecond), ids: map[string]bool{idB: true}}},
			bad:     "lost ip-a",
		},
		{
			name:   "an old allow-ip-change write, superseded by one keeping the address",
			events: concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 25*time.Second, idA, dcPN)}, deleted),
			allowed: []allowedMove{
				{at: at(1 * time.Second), ids: map[string]bool{idB: true}},
				{at: at(2 * time.Second), ids: map[string]bool{idA: true}},
			},
			bad: "lost ip-a",
		},
		{
			name:    "an allow-ip-change write whose answer was lost",
			events:  concat(created, []emulator.AuditEvent{ipEvent(emulator.AuditDetach, 5*time.Second, idA, dcPN)}, deleted),
			allowed: []allowedMove{{at: at(2 * time.Second)}},
			moves:   1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkLiveAddresses(tc.events, map[string]string{svcUID: "chaos-a/web"}, map[string][]allowedMove{svcUID: tc.allowed}, nil,
				map[string]string{dcPN: "dc", nodesPN: "nodes"})
			if got.moves != tc.moves {
				t.Errorf("moves = %d, want %d", got.moves, tc.moves)
			}
			switch {
			case tc.bad == "" && len(got.violations) > 0:
				t.Errorf("violations: %q", got.violations)
			case tc.bad != "" && (len(got.violations) != 1 || !strings.Contains(got.violations[0], tc.bad)):
				t.Errorf("violations: %q, want one with %q", got.violations, tc.bad)
			}
		})
	}
}

func concat(parts ...[]emulator.AuditEvent) []emulator.AuditEvent {
	var out []emulator.AuditEvent
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestStickinessCheck(t *testing.T) {
	cfg, err := ipam.ParseConfig([]byte(`clusterName: chaos
region: fr-par
clusterPrivateNetworkID: 11111111-1111-4111-8111-111111111111
pools:
  - {name: dc-link, privateNetworkID: 22222222-2222-4222-8222-222222222222, retention: 8s}
`))
	if err != nil {
		t.Fatal(err)
	}
	web := types.NamespacedName{Namespace: "chaos-a", Name: "web"}
	tags := func(uid string, orphaned time.Duration) []string {
		e := ipam.Entry{Cluster: "chaos", Pool: "dc-link", Service: web, UID: uid}
		if orphaned > 0 {
			e.OrphanedSince = at(orphaned)
		}
		return e.Tags()
	}
	book := func(id string, d time.Duration) emulator.AuditEvent {
		return emulator.AuditEvent{Time: at(d), Kind: emulator.AuditBook, IPID: id, Address: netip.MustParseAddr("172.16.35.9"), Tags: tags("", 0)}
	}
	retag := func(id string, d time.Duration, uid string, orphaned time.Duration) emulator.AuditEvent {
		return emulator.AuditEvent{Time: at(d), Kind: emulator.AuditTags, IPID: id, Tags: tags(uid, orphaned)}
	}
	// web got A at 0 s (its uid back-filled at 1 s), was deleted at 3 s
	// (A orphaned at 4 s), and created again at 5 s.
	first := []emulator.AuditEvent{book(idA, 0), retag(idA, time.Second, svcUID, 0), retag(idA, 4*time.Second, svcUID, 4*time.Second)}
	// A second incarnation in between (a pinned address, say) got B.
	second := []emulator.AuditEvent{book(idB, 2*time.Second), retag(idB, 2500*time.Millisecond, "uid-2", 0), retag(idB, 4*time.Second, "uid-2", 4*time.Second)}
	again := created{svc: "chaos-a/web", start: at(5 * time.Second), end: at(5200 * time.Millisecond)}
	for _, tc := range []struct {
		name     string
		events   []emulator.AuditEvent
		got      string
		shown    map[string]time.Time
		before   []created // the creates before again
		bad      string
		pending  int
		reused   int
		explains string
	}{
		{name: "took it back", events: first, got: idA, shown: map[string]time.Time{idA: at(0)}, reused: 1},
		{
			name: "a fresh IP although the previous address was there to take back", events: append(first, book(idB, 5100*time.Millisecond)),
			got: idB, shown: map[string]time.Time{idA: at(0)},
			bad: "chaos-a/web (CREATE sent 10:00:05.000) got a fresh IP ip-b booked at 10:00:05.100 instead of its previous address ip-a",
		},
		{
			name: "a fresh IP right after the previous incarnation showed it", events: append(first, book(idB, 5100*time.Millisecond)),
			got: idB, shown: map[string]time.Time{idA: at(4900 * time.Millisecond)},
			explains: "cache lag: a Service first showed ip-a 200ms before the booking",
		},
		{
			name: "a fresh IP while the earlier one was pending (no Service showed it)", events: append(first, book(idB, 5100*time.Millisecond)),
			got: idB, pending: 1,
		},
		{
			name: "took back the oldest of two used reservations, not the last one shown", events: append(first, second...),
			got: idA, shown: map[string]time.Time{idA: at(0), idB: at(2100 * time.Millisecond)},
			explains: "ip-a is the Service's older address (first shown at 10:00:00.000)",
		},
		{
			name: "the previous incarnation pinned another address", events: append(first, second...),
			got: idA, shown: map[string]time.Time{idA: at(0), idB: at(2100 * time.Millisecond)},
			before:   []created{{svc: "chaos-a/web", start: at(2 * time.Second), ids: []string{idB}, address: "172.16.35.200"}},
			explains: "the request changed: the create that got ip-b asked for address 172.16.35.200, this one for the pool",
		},
		{
			// The design's rule takes the oldest booking when no uid is
			// back-filled, although a Service showed ip-b.
			name: "took back a pending booking over the previous address",
			events: []emulator.AuditEvent{
				book(idP, 500*time.Millisecond), retag(idP, 4*time.Second, "", 4*time.Second),
				book(idB, 2*time.Second), retag(idB, 4*time.Second, "", 4*time.Second),
			},
			got: idP, shown: map[string]time.Time{idB: at(2100 * time.Millisecond)},
			bad: "got another earlier reservation ip-p instead of its previous address ip-b, which a Service first showed at 10:00:02.100 (the design prefers the oldest booking",
		},
		{
			name: "took back the last one shown", events: append(first, second...),
			got: idB, shown: map[string]time.Time{idA: at(0), idB: at(2100 * time.Millisecond)}, reused: 1,
		},
		{
			name: "past the retention less the margin: nothing to take back", events: append(first, book(idB, 7*time.Second)),
			got: idB, shown: map[string]time.Time{idA: at(0)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := again
			c.ids = []string{tc.got}
			got := checkStickiness(histories(tc.events), cfg, append(tc.before, c), tc.shown)
			if got.pending != tc.pending || got.reused != tc.reused {
				t.Errorf("pending %d, reused %d; want %d, %d", got.pending, got.reused, tc.pending, tc.reused)
			}
			bad := got.violations()
			switch {
			case tc.bad == "" && len(bad) > 0:
				t.Errorf("violations: %q", bad)
			case tc.bad != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.bad)):
				t.Errorf("violations: %q, want one with %q", bad, tc.bad)
			}
			if tc.explains != "" && (len(got.misses) != 1 || !strings.HasPrefix(got.misses[0].why, tc.explains)) {
				t.Errorf("misses: %v, want one explained by %q", got.misses, tc.explains)
			}
		})
	}
}
