package emulator

import (
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

// What the replay of the Load Balancer recordings needs beyond the IPAM
// ones: the recording's time, the deletions it waits for, and the values
// the Load Balancer API generates.

// lbReplay is the replayer's Load Balancer state.
type lbReplay struct {
	// holds are the deletions accepted and not yet seen finished by the
	// recording, by the emulator's Load Balancer ID.
	holds map[string]func()
	// addrs maps the recorded flexible IP addresses (and their reverse
	// names) to the emulator's, back the other way.
	addrs, back map[string]string
}

var (
	// lbPath is a Load Balancer's own path: its deletion is followed.
	lbPath = regexp.MustCompile(`^/lb/v1/zones/[a-z0-9-]+/lbs/([0-9a-f-]{36})$`)
	// upperMAC is how IPAM shows a Load Balancer's MAC address.
	upperMAC = regexp.MustCompile(`^([0-9A-F]{2}:){5}[0-9A-F]{2}$`)
	// nanoStamp is a timestamp with nanoseconds: the recorded answers to
	// writes show some so, before the API stores them to the microsecond.
	nanoStamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`)
)

// atRecordedTime moves the emulator's clock to the time the recording
// answered (its Date header, to the second): a Load Balancer is then
// creating, ready or settled as it was then.
func (r *replayer) atRecordedTime(h map[string][]string) {
	d := h["Date"]
	if len(d) == 0 {
		return
	}
	at, err := http.ParseTime(d[0])
	if err != nil {
		r.t.Fatalf("%s: Date %q: %v", r.at, d[0], err)
	}
	if at.After(r.clock.Now()) {
		r.clock.SetTime(at)
	}
}

// beforeLBCall holds each Load Balancer's deletion from its DELETE until
// the recording first answers 404 about a Load Balancer or what it held,
// then lets it finish: the recorded API took about 30 s, the replay does
// not wait that long.
func (r *replayer) beforeLBCall(method, path string, recordedCode int) {
	if r.lb.holds == nil {
		r.lb = lbReplay{holds: map[string]func(){}, addrs: map[string]string{}, back: map[string]string{}}
	}
	if recordedCode == http.StatusNotFound && len(r.lb.holds) > 0 {
		for id, release := range r.lb.holds {
			release()
			r.waitLBGone(id)
			delete(r.lb.holds, id)
		}
	}
	m := lbPath.FindStringSubmatch(path)
	if method != http.MethodDelete || m == nil || recordedCode != http.StatusNoContent {
		return
	}
	id, ok := r.ids[m[1]]
	if !ok {
		return
	}
	release, err := r.srv.HoldLBDeletion(id)
	if err != nil {
		r.t.Fatalf("%s: %v", r.at, err)
	}
	r.lb.holds[id] = release
}

func (r *replayer) waitLBGone(id string) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(r.srv.LBs(), func(l LB) bool { return l.ID == id }) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("%s: Load Balancer %s still there after its deletion was released", r.at, id)
}

// lbLeaf compares the leaves the Load Balancer API generates or moves on
// its own; false leaves the leaf to the common rules.
func (r *replayer) lbLeaf(path, key string, rec, emu any) bool {
	rs, isString := rec.(string)
	es, _ := emu.(string)
	switch {
	case !isString:
		return false
	case key == "ip_address" && rs != "":
		// A flexible IP's address: any, the same for the same IP.
		if _, err := netip.ParseAddr(es); err != nil {
			r.errorf("%s: %q is not an address (recorded %s)", path, es, rs)
			return true
		}
		r.mapGenerated(path, rs, es)
	case key == "reverse" && strings.Contains(rs, ".lb."):
		// Its reverse name, derived from the address.
		if want := flexReverse(netip.MustParseAddr(r.lb.addrs[reverseAddr(rs)]), "fr-par"); es != want {
			r.errorf("%s: %q, want %q for the address (recorded %s)", path, es, want, rs)
		}
		r.values++
		r.fields[key]++
	case key == "mac_address":
		if !upperMAC.MatchString(rs) || !upperMAC.MatchString(es) {
			r.errorf("%s: %q, recorded %q: not an upper-case MAC address", path, es, rs)
		}
		r.idChecks++
	case (key == "created_at" || key == "updated_at") && nanoStamp.MatchString(rs):
		// The emulator answers every stamp to the microsecond.
		if !r.stamp.MatchString(es) {
			r.errorf("%s: %v, recorded %v: not the API's timestamp layout", path, emu, rec)
		}
		r.stamps++
	case key == "status" && transientPair(path, rs, es):
		// The recordings answer either within the same second.
		r.values++
		r.fields["status(transient)"]++
	default:
		return false
	}
	return true
}

// transientPair tells whether rec and emu are the two statuses the real API
// shows at random within one second: a Load Balancer to_create or creating
// right after CreateLB, an instance pending or ready right after a change.
func transientPair(path, rec, emu string) bool {
	pair := []string{lbStatusToCreate, lbStatusCreating}
	if strings.HasSuffix(path, "instances[].status") {
		pair = []string{lbInstancePending, lbStatusReady}
	}
	return slices.Contains(pair, rec) && slices.Contains(pair, emu)
}

// reverseAddr is the address of a reverse name: 212-47-249-158.lb... reads
// 212.47.249.158.
func reverseAddr(rev string) string {
	host, _, _ := strings.Cut(rev, ".lb.")
	if strings.Count(host, "-") == 3 {
		return strings.ReplaceAll(host, "-", ".")
	}
	return strings.ReplaceAll(host, "-", ":")
}

// mapGenerated checks that a recorded generated value always stands for the
// same emulated one, and the other way round.
func (r *replayer) mapGenerated(path, rec, emu string) {
	r.idChecks++
	r.fields["ip_address(generated)"]++
	if known, ok := r.lb.addrs[rec]; ok {
		if known != emu {
			r.errorf("%s: %s, but recorded %s stands for %s", path, emu, rec, known)
		}
		return
	}
	if other, taken := r.lb.back[emu]; taken {
		r.errorf("%s: %s stands for both recorded %s and %s", path, emu, other, rec)
		return
	}
	r.lb.addrs[rec], r.lb.back[emu] = emu, rec
}

// instanceBeingAssigned tells whether rec and emu are a new Load Balancer's
// instances, one side without it yet and the other with it, unknown: the
// recordings show both within the second after CreateLB.
func (r *replayer) instanceBeingAssigned(path string, rec, emu []any) bool {
	if !strings.HasSuffix(path, "instances") || len(rec)+len(emu) != 1 {
		return false
	}
	one := slices.Concat(rec, emu)[0]
	if m, ok := one.(map[string]any); !ok || m["status"] != lbInstanceUnknown {
		return false
	}
	r.values++
	r.fields["instances[](being assigned)"]++
	return true
}
