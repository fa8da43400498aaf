package integration

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lbapi "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// convergenceGrace is the webhook's --convergence-grace in the suite: a
// reserved IP found not applied is reported once it has stayed so this
// long (5m by default).
const convergenceGrace = 3 * time.Second

// notConverged is the leader's scw_lb_ipam_services_not_converged by
// reason.
func notConverged(t *testing.T) map[string]float64 {
	t.Helper()
	r := leader(t)
	out := map[string]float64{}
	for _, reason := range sweeper.Reasons() {
		v, ok := r.Gauge("scw_lb_ipam_services_not_converged", "reason", reason)
		if !ok {
			t.Fatalf("%s exports no scw_lb_ipam_services_not_converged{reason=%q}", r.Name, reason)
		}
		out[reason] = v
	}
	return out
}

// leader is the replica that runs the sweeper.
func leader(t *testing.T) *testenv.Replica {
	t.Helper()
	var r *testenv.Replica
	fixtures.Eventually(t, leaseDuration+10*time.Second, poll, "a sweeper leader", func() bool {
		for _, rep := range s.Replicas {
			if rep.Leading() {
				r = rep
				return true
			}
		}
		return false
	})
	return r
}

// waitSweeps waits until the leader has run n cycles more, and returns it.
func waitSweeps(t *testing.T, n uint64) *testenv.Replica {
	t.Helper()
	r := leader(t)
	from := r.Sweeps()
	fixtures.Eventually(t, time.Duration(n)*time.Second+10*time.Second, poll, fmt.Sprintf("%d sweeper cycles", n), func() bool { return r.Sweeps() >= from+n })
	return r
}

// ipNotApplied are the IPNotApplied Events on the Service of that UID.
func ipNotApplied(t *testing.T, svc *corev1.Service) []eventsv1.Event {
	t.Helper()
	return eventsOf(t, svc, sweeper.EventReasonIPNotApplied)
}

// eventsOf are the Events of reason on the Service of that UID.
func eventsOf(t *testing.T, svc *corev1.Service, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := s.Kube.List(context.Background(), &list, client.InNamespace(svc.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.UID == svc.UID {
			out = append(out, e)
		}
	}
	return out
}

// reported waits until the gauge counts one Service more than base for
// reason, and the Service has its IPNotApplied Event, which must name id,
// the reason and every string of want.
func reported(t *testing.T, svc *corev1.Service, base map[string]float64, reason, id string, want ...string) {
	t.Helper()
	// A creation's cycle comes after the sweeper's debounce (5s).
	fixtures.Eventually(t, convergenceGrace+20*time.Second, poll, fmt.Sprintf("the gauge to count %s/%s as %s", svc.Namespace, svc.Name, reason), func() bool {
		return notConverged(t)[reason] == base[reason]+1
	})
	var note string
	fixtures.Eventually(t, 10*time.Second, poll, "the IPNotApplied Event of "+svc.Namespace+"/"+svc.Name, func() bool {
		evs := ipNotApplied(t, svc)
		if len(evs) > 0 {
			note = evs[0].Note
		}
		return len(evs) > 0
	})
	for _, w := range append([]string{id, "[" + reason + "]"}, want...) {
		if !strings.Contains(note, w) {
			t.Fatalf("the Event's note does not name %q: %s", w, note)
		}
	}
}

// reportedOnce checks that each Service marked true has exactly one
// IPNotApplied Event, recorded once (the monitor repeats it only when the
// cause changes), and each marked false none.
func reportedOnce(t *testing.T, svcs map[*corev1.Service]bool) {
	t.Helper()
	for svc, once := range svcs {
		evs := ipNotApplied(t, svc)
		switch {
		case !once && len(evs) > 0:
			t.Fatalf("%s/%s got IPNotApplied: %s", svc.Namespace, svc.Name, evs[0].Note)
		case once && len(evs) != 1:
			t.Fatalf("%s/%s has %d IPNotApplied Events, want 1", svc.Namespace, svc.Name, len(evs))
		case once && (evs[0].Series != nil || evs[0].DeprecatedCount > 1):
			t.Fatalf("%s/%s's IPNotApplied was recorded again: series %+v, count %d", svc.Namespace, svc.Name, evs[0].Series, evs[0].DeprecatedCount)
		}
	}
}

// poolService creates a Service of namespace web on pool dc-link, waits
// until the CCM made its Load Balancer, and returns it with its
// reserved ID. It is deleted when the test keep ends.
func poolService(t, keep *testing.T, name string) (*corev1.Service, string) {
	t.Helper()
	if err := s.Kube.Create(context.Background(), fixtures.PrivateService("web", name, map[string]string{request.AnnotationPool: "dc-link"})); err != nil {
		t.Fatal(err)
	}
	var svc *corev1.Service
	fixtures.Eventually(t, 15*time.Second, poll, "the Load Balancer of web/"+name, func() bool {
		svc = get(t, "web", name)
		return svc.Annotations[ccm.AnnotationLoadBalancerID] != ""
	})
	keep.Cleanup(func() { del(keep, svc) })
	return svc, svc.Annotations[ccm.AnnotationPrivateIPIDs]
}

// TestConvergenceMonitor: the sweeper's leader reports a Service
// whose reserved IP is not on its Load Balancer past the grace, with the
// likely cause, from the listing each cycle already makes. Each case is a
// Service of its own, kept to the end: a converged one; an IP released out
// of band; a previous Load Balancer that never finishes deleting; a CCM
// older than v0.36.0 (test/oldccm, a fake of v0.35 ignoring private-ip-ids). With all four
// in place the cycle still makes only its listing and the ledger's writes;
// the old CCM's Service converges once the CCM is upgraded.
func TestConvergenceMonitor(t *testing.T) {
	all := t
	console, err := s.Console()
	if err != nil {
		t.Fatal(err)
	}
	base := notConverged(t)
	events := map[*corev1.Service]bool{}

	var applied *corev1.Service
	if !t.Run("converged: neither Event nor gauge", func(t *testing.T) {
		scenario(t, func(t *testing.T) {
			var x string
			applied, x = poolService(t, all, "converged")
			attachedTo(t, "web", "converged", x)
			ip, _ := s.Emu.IP(x)
			addr, _, _ := strings.Cut(ip.Address.String(), "/")
			fixtures.Eventually(t, 10*time.Second, poll, "the reserved address in the status", func() bool {
				for _, in := range get(t, "web", "converged").Status.LoadBalancer.Ingress {
					if in.IP == addr {
						return true
					}
				}
				return false
			})
			// Had the monitor found it wanting, the second cycle from now
			// (the first may be under way) would have started the grace,
			// and the first two cycles past the grace would report it.
			// Cycles are no clock (a creation triggers one after a
			// debounce, ticks come every second): both counts are needed.
			waitSweeps(t, 2)
			time.Sleep(convergenceGrace)
			waitSweeps(t, 2)
			if got := notConverged(t); !sameGauges(got, base) {
				t.Fatalf("not-converged gauges %v, want %v", got, base)
			}
			hasCondition(t, 5*time.Second, "web", "converged", view.ConditionApplied, metav1.ConditionTrue, "Applied")
			events[applied] = false
			reportedOnce(t, events)
		})
	}) {
		return
	}

	if !t.Run("IP released out of band: gone_from_ipam", func(t *testing.T) {
		scenario(t, func(t *testing.T) {
			svc, x := poolService(t, all, "released")
			attachedTo(t, "web", "released", x)
			// As in the console: detach the pool's network from the Load
			// Balancer, then delete the IP.
			_, lbID, _ := strings.Cut(get(t, "web", "released").Annotations[ccm.AnnotationLoadBalancerID], "/")
			if err := lbapi.NewZonedAPI(console).DetachPrivateNetwork(&lbapi.ZonedAPIDetachPrivateNetworkRequest{LBID: lbID, PrivateNetworkID: s.PNs["dc"].ID}); err != nil {
				t.Fatal(err)
			}
			if err := ipamapi.NewAPI(console).ReleaseIP(&ipamapi.ReleaseIPRequest{IPID: x}); err != nil {
				t.Fatal(err)
			}
			reported(t, svc, base, sweeper.ReasonGone, x, "released or deleted out of band")
			events[svc] = true
			hasCondition(t, 5*time.Second, "web", "released", view.ConditionReserved, metav1.ConditionFalse, "GoneFromIPAM")
			hasCondition(t, 5*time.Second, "web", "released", view.ConditionApplied, metav1.ConditionFalse, "GoneFromIPAM")
		})
	}) {
		return
	}

	if !t.Run("previous Load Balancer never deleted: attached_elsewhere", func(t *testing.T) {
		scenario(t, func(t *testing.T) {
			old, x := poolService(t, all, "stuck")
			attachedTo(t, "web", "stuck", x)
			_, oldLB, _ := strings.Cut(old.Annotations[ccm.AnnotationLoadBalancerID], "/")
			release, err := s.Emu.HoldLBDeletion(oldLB)
			if err != nil {
				t.Fatal(err)
			}
			// Held to the end of the whole test: the re-created Service
			// is deleted first (cleanups run last in, first out).
			all.Cleanup(release)
			// The CCM lets the Service go once DeleteLB is accepted; the
			// Load Balancer stays to_delete with X.
			del(t, old)
			if ip, _ := s.Emu.IP(x); ip.Resource == nil || ip.Resource.ID != oldLB {
				t.Fatalf("X after the deletion: attached to %+v, want the old Load Balancer %s", ip.Resource, oldLB)
			}
			svc, got := poolService(t, all, "stuck")
			if got != x {
				t.Fatalf("the re-create was admitted with %q, want its reservation %s", got, x)
			}
			if _, lb, _ := strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/"); lb == oldLB {
				t.Fatalf("the re-create is on the old Load Balancer %s", lb)
			}
			reported(t, svc, base, sweeper.ReasonAttachedElsewhere, x, oldLB, string(old.UID))
			events[svc] = true
		})
	}) {
		return
	}

	// Set back however the rest goes: later scenarios expect v0.36.0.
	all.Cleanup(func() {
		if err := s.CCM.Restart(); err != nil {
			t.Error(err)
		}
	})
	var old *corev1.Service
	var oldX string
	if !t.Run("CCM older than v0.36.0: not_attached", func(t *testing.T) {
		scenario(t, func(t *testing.T) {
			if err := s.CCM.RunOld(); err != nil {
				t.Fatal(err)
			}
			old, oldX = poolService(t, all, "old-ccm")
			// The old CCM attached the pool's network with DHCP and
			// reports that address: the user sees a status, not X's.
			fixtures.Eventually(t, 10*time.Second, poll, "the DHCP status", func() bool {
				return len(get(t, "web", "old-ccm").Status.LoadBalancer.Ingress) > 0
			})
			if ip, _ := s.Emu.IP(oldX); ip.Resource != nil {
				t.Fatalf("the old CCM attached X to %+v", ip.Resource)
			}
			reported(t, old, base, sweeper.ReasonNotAttached, oldX, "v0.36.0")
			events[old] = true
			// The condition says it at once, in the same words.
			c := hasCondition(t, 5*time.Second, "web", "old-ccm", view.ConditionApplied, metav1.ConditionFalse, "NotAttached")
			if !strings.Contains(c.Message, oldX) || !strings.Contains(c.Message, "v0.36.0") {
				t.Fatalf("Applied's message names neither %s nor v0.36.0: %s", oldX, c.Message)
			}
			hasCondition(t, 5*time.Second, "web", "old-ccm", view.ConditionReserved, metav1.ConditionTrue, "Reserved")
		})
	}) {
		return
	}

	if !t.Run("the monitor adds no Scaleway call to the cycle", func(t *testing.T) {
		scenario(t, func(t *testing.T) {
			// All four cases are in place and reported.
			want := map[string]float64{}
			for r, v := range base {
				want[r] = v
			}
			want[sweeper.ReasonGone]++
			want[sweeper.ReasonAttachedElsewhere]++
			want[sweeper.ReasonNotAttached]++
			if got := notConverged(t); !sameGauges(got, want) {
				logNotApplied(t)
				t.Fatalf("not-converged gauges %v, want %v", got, want)
			}
			cycleCalls(t)
		})
	}) {
		return
	}

	t.Run("upgraded to v0.36.0, the old CCM's Service converges", func(t *testing.T) {
		scenario(t, func(t *testing.T) {
			if err := s.CCM.Restart(); err != nil {
				t.Fatal(err)
			}
			attachedTo(t, "web", "old-ccm", oldX)
			fixtures.Eventually(t, convergenceGrace+10*time.Second, poll, "the gauge to forget web/old-ccm", func() bool {
				return notConverged(t)[sweeper.ReasonNotAttached] == base[sweeper.ReasonNotAttached]
			})
			// Converging is not a new cause: no second Event, here or on the
			// Services whose causes stayed through the CCM's restarts.
			waitSweeps(t, 2)
			reportedOnce(t, events)
			// A new leader restores its memory from these Events with one
			// list by reason: the apiserver must serve that field selector.
			var byReason eventsv1.EventList
			if err := s.Kube.List(context.Background(), &byReason, client.MatchingFields{"reason": sweeper.EventReasonIPNotApplied}); err != nil {
				t.Fatalf("listing events.k8s.io Events by reason, as a new leader does: %v", err)
			}
			listed := map[string]bool{}
			for _, e := range byReason.Items {
				if e.Reason != sweeper.EventReasonIPNotApplied {
					t.Fatalf("the field selector let through %s", e.Reason)
				}
				listed[string(e.Regarding.UID)] = true
			}
			for svc, once := range events {
				if once && !listed[string(svc.UID)] {
					t.Fatalf("%s/%s's IPNotApplied is not in the list by reason", svc.Namespace, svc.Name)
				}
			}
		})
	})
}

// logNotApplied logs every IPNotApplied Event of namespace web, to tell
// which Service a gauge counts.
func logNotApplied(t *testing.T) {
	var list eventsv1.EventList
	if err := s.Kube.List(context.Background(), &list, client.InNamespace("web")); err != nil {
		t.Log(err)
	}
	for _, e := range list.Items {
		if e.Reason == sweeper.EventReasonIPNotApplied {
			t.Logf("%s (uid %s): %s", e.Regarding.Name, e.Regarding.UID, e.Note)
		}
	}
}

func sameGauges(a, b map[string]float64) bool {
	for _, r := range sweeper.Reasons() {
		if a[r] != b[r] {
			return false
		}
	}
	return true
}

// cycleCalls counts the webhook's Scaleway calls over whole sweeper cycles
// of the leader: each lists this cluster's reservations, ⌈N/page⌉ calls,
// and writes the ledger (tags, releases) where it changed. Anything else
// (a read of an IP, a Load Balancer, a network) would be the monitor's, and
// fails at once. A window whose edges are not clean (two cycles back to
// back, a listing of a pool's subnet by the reservation index, which runs
// every minute on each replica) is measured again, up to three times: a
// monitor listing each cycle would spoil every window.
func cycleCalls(t *testing.T) {
	t.Helper()
	const cycles, tries = 3, 3
	clusterTag := ipam.TagCluster + "it"
	for try := 1; try <= tries; try++ {
		// From the end of a cycle to the end of the cycles-th after it: in
		// steady state the next starts a tick (1s) later, far from either
		// edge of the window.
		r := waitSweeps(t, 2)
		start, from := r.Sweeps(), len(s.Emu.Requests())
		fixtures.Eventually(t, cycles*time.Second+10*time.Second, poll, "the cycles", func() bool { return r.Sweeps() >= start+cycles })
		end, reqs := r.Sweeps(), s.WebhookRequests(from)
		n := 0
		for _, ip := range s.Emu.IPs() {
			for _, tag := range ip.Tags {
				if tag == clusterTag {
					n++
				}
			}
		}
		pages := (n + scaleway.DefaultPageSize - 1) / scaleway.DefaultPageSize
		listings, writes, index := 0, map[emulator.Op]int{}, 0
		for _, req := range reqs {
			query, _ := url.QueryUnescape(req.Path)
			switch {
			case req.Op == emulator.OpListIPs && strings.Contains(query, "tags="+clusterTag) && !strings.Contains(query, "private_network_id="):
				listings++
			case req.Op == emulator.OpListIPs && strings.Contains(query, "private_network_id=") && !strings.Contains(query, "tags="):
				index++
			case req.Op == emulator.OpUpdateIP || req.Op == emulator.OpReleaseIP:
				writes[req.Op]++
			default:
				t.Fatalf("a cycle made %s %s, which is neither its listing nor a ledger write", req.Method, query)
			}
		}
		switch {
		case end != start+cycles:
			t.Logf("window %d: %d cycles ran, the poll saw them as %d: measuring again", try, end-start, cycles)
		case index > 0:
			t.Logf("window %d: %d listings of a pool's subnet: measuring again", try, index)
		case listings != cycles*pages:
			t.Logf("window %d: %d listings in %d cycles of %d reservations, want %d (⌈N/%d⌉ a cycle): measuring again", try, listings, cycles, n, cycles*pages, scaleway.DefaultPageSize)
		default:
			t.Logf("%d cycles, %d reservations: %d listings, ledger writes %v", cycles, n, listings, writes)
			return
		}
	}
	t.Fatalf("no clean window in %d: each held more than ⌈N/%d⌉ listings a cycle and the ledger's writes", tries, scaleway.DefaultPageSize)
}
