package sweeper

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// noteLengthLimit is events.k8s.io/v1's limit on a note (NoteLengthLimit):
// a longer one is rejected, and the Event lost.
const noteLengthLimit = 1024

func reasonsOf(fs []finding) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, f.reason) {
			out = append(out, f.reason)
		}
	}
	return out
}

// causeOf keys the Event: a new one is recorded only when it changes.
func causeOf(fs []finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.key()
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// note is the Event's text: one line per IP not applied, naming what holds
// it, then one fix per distinct reason (a pointer to the runbook where they
// do not fit); cut to what events.k8s.io accepts. The lines come first so
// that parseNote reads the cause back.
func note(t Target, fs []finding, late time.Duration) string {
	header := fmt.Sprintf("%d reserved IP(s) of this Service not applied after %s:", len(fs), late.Round(time.Second))
	dns := dnsLine(t, fs)
	// Many IPs: the lines name them all, the runbook the fixes, and the
	// holders' names go first.
	const runbook = "\nFixes: the runbook ScwLbIpamServicesNotConverged in docs/alerts.md."
	for _, o := range []struct {
		names bool
		fix   string
	}{{true, fixLines(t, fs)}, {true, runbook}, {false, runbook}} {
		out := header + noteLines(fs, o.names) + dns + o.fix
		if len(out) <= noteLengthLimit {
			return out
		}
	}
	return truncateNote(header+noteLines(fs, false)+dns+runbook, noteLengthLimit)
}

// fixLines are the fixes of the findings' reasons, a line each ("\n[reason]
// …"): the note's and the Applied condition's.
func fixLines(t Target, fs []finding) string {
	var fix strings.Builder
	lb := t.LoadBalancerID
	for _, r := range reasonsOf(fs) {
		fmt.Fprintf(&fix, "\n[%s] ", r)
		switch r {
		case ReasonNotAttached:
			fmt.Fprintf(&fix, "Load Balancer %s exists: likely the CCM ignored %s (older than v0.36.0; the LB has a DHCP address): upgrade it (Kapsule: the cluster). A newer CCM failing to attach (e.g. over 8 Private Networks) looks the same: look for SyncLoadBalancerFailed in `kubectl describe service`.", lb, ccm.AnnotationPrivateIPIDs)
		case ReasonAttachedElsewhere:
			fmt.Fprintf(&fix, "not on this Service's Load Balancer %s: likely its previous one, still being deleted (`scw lb lb get <id>`): wait. Stuck in to_delete over ~1h: open a Scaleway support ticket, or move to a new address with %s. Another resource: detach the IP from it.", lb, request.AnnotationAllowIPChange)
		case ReasonGone:
			fmt.Fprintf(&fix, "released or deleted out of band. Re-create the Service with %s set to the old address (booked anew if still free), or set %s: \"true\" and ask for another address. Removing the ID from %s does not help: it is put back.", request.AnnotationAddress, request.AnnotationAllowIPChange, ccm.AnnotationPrivateIPIDs)
		case ReasonNotInStatus:
			fix.WriteString("on the Load Balancer, not yet in status.loadBalancer.ingress: the CCM has not finished syncing; see `kubectl describe service`.")
		}
	}
	return fix.String()
}

// dnsLine says, when external-dns publishes the Service's name at its
// reserved addresses, which of them the CCM has not attached: the
// datacenter's lookups of that name reach nothing. An address only
// missing from the status is attached (it serves), and not named.
func dnsLine(t Target, fs []finding) string {
	if !t.DNS {
		return ""
	}
	var addrs []string
	for _, f := range fs {
		if f.reason != ReasonNotInStatus && f.address != "" && slices.Contains(t.Addresses, f.address) && !slices.Contains(addrs, f.address) {
			addrs = append(addrs, f.address)
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	return fmt.Sprintf("\nDNS points at %s, which the CCM has not attached: external-dns publishes this Service's name there (the target scw-lb-ipam wrote), so lookups of it reach nothing until the IP is applied.", strings.Join(addrs, ", "))
}

// noteLines are the note's lines, one per IP, with the holders' names or
// without.
func noteLines(fs []finding, names bool) string {
	var b strings.Builder
	for _, f := range fs {
		addr := f.address
		if addr == "" {
			addr = "unknown address"
		}
		fmt.Fprintf(&b, "\nIPAM IP %s (%s) [%s] ", f.id, addr, f.reason)
		switch {
		case f.reason == ReasonGone:
			b.WriteString("gone from IPAM")
		case f.reason == ReasonNotInStatus:
			b.WriteString("on its Load Balancer")
		case f.resource == nil:
			b.WriteString("attached to nothing")
		default:
			fmt.Fprintf(&b, "attached to %s/%s", f.resource.Type, f.resource.ID)
			if names && f.resource.Name != "" {
				fmt.Fprintf(&b, " (%s)", f.resource.Name)
			}
		}
	}
	return b.String()
}

// truncateNote cuts s to at most limit bytes, on a line boundary where one
// is near, never inside a UTF-8 sequence.
func truncateNote(s string, limit int) string {
	const more = "\n…"
	if len(s) <= limit {
		return s
	}
	cut := limit - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl > limit/2 {
		cut = nl
	}
	return s[:cut] + more
}

// noteLine is one IP line of a note, as note writes it.
var noteLine = regexp.MustCompile(`^IPAM IP (\S+) \([^)]*\) \[(\w+)\] (?:attached to (\S+/\S+)|attached to nothing|gone from IPAM|on its Load Balancer)`)

// parseNote reads the cause back from a note: the findings' keys, sorted as
// causeOf sorts them.
func parseNote(s string) string {
	var parts []string
	for _, line := range strings.Split(s, "\n") {
		m := noteLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k := m[1] + "=" + m[2]
		if m[3] != "" {
			k += "@" + m[3]
		}
		parts = append(parts, k)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
