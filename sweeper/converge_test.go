package sweeper

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

const testGrace = 5 * time.Minute

// monitored is a sweeper with metrics and its own Event list.
func (w *world) monitored(mod ...func(*Options)) (*Sweeper, *events) {
	ev := &events{}
	s := w.sweeper(append([]func(*Options){func(o *Options) {
		o.Recorder, o.Metrics, o.ConvergenceGrace = ev, NewMetrics(prometheus.NewRegistry()), testGrace
	}}, mod...)...)
	return s, ev
}

// admitted creates a private LoadBalancer Service holding rs as the webhook
// writes it: the IDs and the addresses.
func (w *world) admitted(name string, rs ...*ipam.Grant) *corev1.Service {
	w.T.Helper()
	var ids, addrs []string
	for _, r := range rs {
		ids, addrs = append(ids, r.ID), append(addrs, r.Address.String())
	}
	svc := w.Live("payments", name, ids...)
	w.edit(svc, func(s *corev1.Service) {
		s.Annotations[request.AnnotationAddresses] = strings.Join(addrs, ",")
		s.Annotations[ccm.AnnotationPrivate] = "true"
	})
	return svc
}

// edit changes a Service in the cache, status included.
func (w *world) edit(svc *corev1.Service, change func(*corev1.Service)) {
	w.T.Helper()
	ctx := context.Background()
	if err := w.Kube.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, svc); err != nil {
		w.T.Fatal(err)
	}
	change(svc)
	if err := w.Kube.Update(ctx, svc); err != nil {
		w.T.Fatal(err)
	}
	change(svc) // the update answered with the stored status
	if err := w.Kube.Status().Update(ctx, svc); err != nil {
		w.T.Fatal(err)
	}
}

// serve is the CCM making the Load Balancer lb for svc: its ID on the
// Service, and, with attach, the reserved IPs on it and in the status.
func (w *world) serve(svc *corev1.Service, lb string, attach bool) {
	w.T.Helper()
	var ingress []corev1.LoadBalancerIngress
	for _, id := range ccm.ReferencedIDs(svc) {
		ip, _ := w.Srv.IP(id)
		if attach {
			if err := w.Srv.Attach(id, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: lb, Name: "k8s-" + string(svc.UID)}); err != nil {
				w.T.Fatal(err)
			}
			ingress = append(ingress, corev1.LoadBalancerIngress{IP: ip.Address.IP.String()})
		}
	}
	w.edit(svc, func(s *corev1.Service) {
		s.Annotations[ccm.AnnotationLoadBalancerID] = "fr-par-1/" + lb
		s.Status.LoadBalancer.Ingress = ingress
	})
}

// cycles runs n cycles a minute apart and returns the last report. It
// does not check invariant 2 as sweep does: these tests release IPs of live
// Services out of band; the sweeper releasing one would show in its report.
func (w *world) cycles(s *Sweeper, n int) Report {
	w.T.Helper()
	var rep Report
	for range n {
		var err error
		if rep, err = s.Sweep(context.Background()); err != nil {
			w.T.Fatal(err)
		}
		if len(rep.Released) > 0 {
			w.T.Fatalf("released %v", rep.Released)
		}
		w.Clock.Step(time.Minute)
	}
	return rep
}

func gauge(t *testing.T, s *Sweeper) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range Reasons() {
		out[r] = testutil.ToFloat64(s.o.Metrics.notConverged.WithLabelValues(r))
	}
	return out
}

func wantGauge(t *testing.T, s *Sweeper, want map[string]float64) {
	t.Helper()
	got := gauge(t, s)
	for _, r := range Reasons() {
		if got[r] != want[r] {
			t.Fatalf("scw_lb_ipam_services_not_converged %v, want %v", got, want)
		}
	}
}

func notApplied(ev *events) []string { return ev.of(EventReasonIPNotApplied) }

// of are the Events of reason.
func (e *events) of(reason string) []string {
	var out []string
	for _, line := range e.list {
		if strings.Contains(line, " "+reason+" ") {
			out = append(out, line)
		}
	}
	return out
}

func TestConvergedServiceIsNotReported(t *testing.T) {
	w := newWorld(t)
	s, ev := w.monitored()
	svc := w.admitted("api", w.book("dc-link", "payments", "api"), w.book("general", "payments", "api"))
	w.serve(svc, "lb-1", true)
	rep := w.cycles(s, 20)
	if len(notApplied(ev)) != 0 {
		t.Fatalf("a converged Service got %v", ev.list)
	}
	if len(rep.NotConverged) != len(Reasons()) {
		t.Fatalf("report %v: every reason must be present", rep.NotConverged)
	}
	wantGauge(t, s, nil)
	if len(s.notConverged) != 0 {
		t.Fatalf("remembers %d converged Services", len(s.notConverged))
	}
}

// Each cause reaches the gauge only once the grace has passed, and gets
// exactly one Event however many cycles it lasts.
func TestEachCauseReportedOnceAfterTheGrace(t *testing.T) {
	for _, tc := range []struct {
		reason string
		break_ func(w *world, svc *corev1.Service, r *ipam.Grant)
		want   []string
	}{
		{ReasonNotAttached, func(w *world, svc *corev1.Service, _ *ipam.Grant) {
			w.serve(svc, "lb-1", false) // an old CCM: a Load Balancer, a DHCP address
		}, []string{"attached to nothing", "likely the CCM ignored", "older than v0.36.0", ccm.AnnotationPrivateIPIDs, "SyncLoadBalancerFailed", "kubectl describe service"}},
		{ReasonAttachedElsewhere, func(w *world, svc *corev1.Service, r *ipam.Grant) {
			w.serve(svc, "lb-new", false)
			if err := w.Srv.Attach(r.ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-old", Name: "k8s-api-previous"}); err != nil {
				t.Fatal(err)
			}
		}, []string{"attached to lb_server/lb-old (k8s-api-previous)", "not on this Service's Load Balancer lb-new", "still being deleted", "to_delete over ~1h", "support ticket", request.AnnotationAllowIPChange}},
		{ReasonGone, func(w *world, _ *corev1.Service, r *ipam.Grant) {
			if err := w.Cloud.ReleaseIP(context.Background(), r.ID); err != nil { // out of band
				t.Fatal(err)
			}
		}, []string{"gone from IPAM", "Re-create the Service with " + request.AnnotationAddress, request.AnnotationAllowIPChange, "does not help"}},
		{ReasonNotInStatus, func(w *world, svc *corev1.Service, _ *ipam.Grant) {
			w.serve(svc, "lb-1", true)
			w.edit(svc, func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = nil })
		}, []string{"not yet in status.loadBalancer.ingress", "kubectl describe service"}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			w := newWorld(t)
			s, ev := w.monitored()
			r := w.book("dc-link", "payments", "api")
			svc := w.admitted("api", r)
			tc.break_(w, svc, r)
			w.cycles(s, int(testGrace/time.Minute)) // up to just before the grace
			if len(notApplied(ev)) != 0 {
				t.Fatalf("reported within the grace: %v", ev.list)
			}
			wantGauge(t, s, nil)
			rep := w.cycles(s, 30)
			if rep.NotConverged[tc.reason] != 1 {
				t.Fatalf("report %v, want 1 %s", rep.NotConverged, tc.reason)
			}
			wantGauge(t, s, map[string]float64{tc.reason: 1})
			got := notApplied(ev)
			if len(got) != 1 {
				t.Fatalf("%d Events over 30 cycles, want 1: %v", len(got), got)
			}
			for _, want := range append(tc.want, "Warning IPNotApplied payments/api", r.ID, r.Address.String(), "["+tc.reason+"]") {
				if !strings.Contains(got[0], want) {
					t.Errorf("Event lacks %q: %s", want, got[0])
				}
			}
		})
	}
}

func TestCauseChangeGetsANewEventAndConvergenceClearsIt(t *testing.T) {
	w := newWorld(t)
	s, ev := w.monitored()
	r := w.book("dc-link", "payments", "api")
	svc := w.admitted("api", r)
	w.serve(svc, "lb-new", false)
	w.cycles(s, 10)
	if got := notApplied(ev); len(got) != 1 || !strings.Contains(got[0], "["+ReasonNotAttached+"]") {
		t.Fatalf("events %v", got)
	}
	// The previous Load Balancer grabs it: another cause, with a grace of
	// its own (for the Event and the gauge), then a new Event.
	if err := w.Srv.Attach(r.ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-old", Name: "old"}); err != nil {
		t.Fatal(err)
	}
	w.cycles(s, int(testGrace/time.Minute))
	if got := notApplied(ev); len(got) != 1 {
		t.Fatalf("the new cause reported within its grace: %v", got)
	}
	wantGauge(t, s, nil)
	w.cycles(s, 1)
	if got := notApplied(ev); len(got) != 2 || !strings.Contains(got[1], "["+ReasonAttachedElsewhere+"]") {
		t.Fatalf("no new Event for the new cause: %v", got)
	}
	wantGauge(t, s, map[string]float64{ReasonAttachedElsewhere: 1})
	w.cycles(s, 10)
	if got := notApplied(ev); len(got) != 2 {
		t.Fatalf("the same cause repeated: %v", got)
	}

	// Converged: the gauge drops and the Service is forgotten.
	if err := w.Srv.Detach(r.ID); err != nil {
		t.Fatal(err)
	}
	w.serve(svc, "lb-new", true)
	w.cycles(s, 1)
	wantGauge(t, s, nil)
	if len(s.notConverged) != 0 {
		t.Fatal("a converged Service is still remembered")
	}
	// Broken again: a fresh grace, then the cause is reported again.
	if err := w.Srv.Detach(r.ID); err != nil {
		t.Fatal(err)
	}
	w.cycles(s, 5)
	if got := notApplied(ev); len(got) != 2 {
		t.Fatalf("reported within a fresh grace: %v", got)
	}
	w.cycles(s, 2)
	if got := notApplied(ev); len(got) != 3 || !strings.Contains(got[2], "["+ReasonNotAttached+"]") {
		t.Fatalf("events %v", got)
	}
	// Deleted: forgotten.
	w.Remove(svc)
	w.cycles(s, 1)
	if len(s.notConverged) != 0 {
		t.Fatal("a deleted Service is still remembered")
	}
}

// Several IPs of one Service: the Event names each one not applied, the
// gauge counts the Service once per reason.
func TestServiceCountedOncePerReason(t *testing.T) {
	w := newWorld(t)
	s, ev := w.monitored()
	a, b, c := w.book("dc-link", "payments", "api"), w.book("general", "payments", "api"), w.book("general", "payments", "api")
	svc := w.admitted("api", a, b, c)
	w.serve(svc, "lb-1", false)
	if err := w.Cloud.ReleaseIP(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	w.cycles(s, 10)
	wantGauge(t, s, map[string]float64{ReasonNotAttached: 1, ReasonGone: 1})
	got := notApplied(ev)
	if len(got) != 1 {
		t.Fatalf("events %v", got)
	}
	for _, want := range []string{"3 reserved IP(s)", a.ID, b.ID, c.ID, c.Address.String() + ") [" + ReasonGone + "]"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("Event lacks %q: %s", want, got[0])
		}
	}
}

// An ID our listing does not hold reads as gone only when it is one of our
// reservations: never a bring-your-own one (by annotation or by claim),
// never one of ours outside the pools' subnets (listed, only out of scope),
// and not when the claims could not be read.
func TestOnlyOurReservationsReadAsGone(t *testing.T) {
	w := newWorld(t)
	edge := w.PNs["edge"].ID
	byAnnotation, _ := w.Srv.AddIP(edge, netip.MustParseAddr("10.10.9.1"), []string{"terraform"}, nil)
	byClaim, _ := w.Srv.AddIP(edge, netip.MustParseAddr("10.10.9.2"), []string{"terraform"}, nil)
	outOfScope, _ := w.Srv.AddIP(w.PNs["nodes"].ID, netip.MustParseAddr("172.16.0.50"),
		ipam.Entry{Cluster: "prod", Pool: "removed", Service: types.NamespacedName{Namespace: "payments", Name: "legacy"}}.Tags(), nil)
	claims := &askedClaims{id: byClaim, svc: types.NamespacedName{Namespace: "payments", Name: "claimed"}}
	s, ev := w.monitored(func(o *Options) { o.Claims = claims })

	withIDs := func(name, id, addr string, extra map[string]string) {
		svc := w.Live("payments", name, id)
		w.edit(svc, func(s *corev1.Service) {
			s.Annotations[request.AnnotationAddresses] = addr
			for k, v := range extra {
				s.Annotations[k] = v
			}
		})
	}
	withIDs("byo", byAnnotation, "10.10.9.1", map[string]string{request.AnnotationIPAMIDs: byAnnotation})
	withIDs("claimed", byClaim, "10.10.9.2", nil)
	withIDs("legacy", outOfScope, "172.16.0.50", nil)
	rep := w.cycles(s, 20)
	if rep.OutOfScope != 1 {
		t.Fatalf("the out-of-scope IP is not listed as such: %+v", rep)
	}
	if got := notApplied(ev); len(got) != 0 {
		t.Fatalf("reported: %v", got)
	}
	wantGauge(t, s, nil)

	// The claims cannot be read: the claimed ID is not judged.
	s2, ev2 := w.monitored(func(o *Options) { o.Claims = failingClaims{} })
	w.cycles(s2, 20)
	if got := notApplied(ev2); len(got) != 0 {
		t.Fatalf("judged without the claims: %v", got)
	}
	// Without its claim, the ID our listing misses is confirmed with a
	// GetIP once past the grace, and again a grace later: it exists (not
	// ours), so nothing is reported.
	s3, ev3 := w.monitored()
	w.Srv.ResetCounts()
	w.cycles(s3, 20)
	if got := notApplied(ev3); len(got) != 0 {
		t.Fatalf("an existing IP reported: %v", got)
	}
	if n := w.Srv.Count(emulator.OpGetIP); n != 3 {
		t.Fatalf("%d GetIP over 20 cycles, want 3 (the claimed ID, at 5, 10 and 15 minutes)", n)
	}
	// A control: released, it is gone, once a grace later.
	if err := w.Cloud.ReleaseIP(context.Background(), byClaim); err != nil {
		t.Fatal(err)
	}
	w.cycles(s3, 20)
	if got := notApplied(ev3); len(got) != 1 || !strings.Contains(got[0], "payments/claimed") || !strings.Contains(got[0], ReasonGone) {
		t.Fatalf("events %v", got)
	}
}

type failingClaims struct{}

func (failingClaims) Collect(context.Context, func(string, types.NamespacedName) bool) (int, []string, error) {
	return 0, nil, errors.New("leases: connection refused")
}

// A cycle whose claims cannot be read keeps what the monitor knew of a
// Service waiting on a claim: no fresh grace, no repeated Event.
func TestUnreadClaimsKeepTheState(t *testing.T) {
	w := newWorld(t)
	r := w.book("dc-link", "payments", "api")
	w.admitted("api", r)
	if err := w.Cloud.ReleaseIP(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	var claims ClaimCollector = &askedClaims{id: "another", svc: types.NamespacedName{Namespace: "x", Name: "y"}}
	s, ev := w.monitored(func(o *Options) { o.Claims = claimsFunc(func() ClaimCollector { return claims }) })
	w.cycles(s, 10)
	claims = failingClaims{}
	w.cycles(s, 3)
	wantGauge(t, s, map[string]float64{ReasonGone: 1})
	claims = &askedClaims{id: "another", svc: types.NamespacedName{Namespace: "x", Name: "y"}}
	w.cycles(s, 3)
	if got := notApplied(ev); len(got) != 1 {
		t.Fatalf("events %v", got)
	}
}

type claimsFunc func() ClaimCollector

func (f claimsFunc) Collect(ctx context.Context, inUse func(string, types.NamespacedName) bool) (int, []string, error) {
	return f().Collect(ctx, inUse)
}

// The monitor judges from the cycle's listing and the Service cache: a
// cycle makes the same Scaleway calls with Services to monitor, in every
// state, as without.
func TestMonitorAddsNoScalewayCall(t *testing.T) {
	steady := func(populate func(w *world)) (map[emulator.Op]int, Report) {
		w := newWorld(t)
		populate(w)
		s, _ := w.monitored()
		// Back-fills and orphan tags settle; past the convergence grace,
		// within the pending grace of the reservations without a Service.
		w.cycles(s, 7)
		w.Srv.ResetCounts()
		rep := w.cycles(s, 1)
		return w.Srv.Counts(), rep
	}
	without, _ := steady(func(w *world) {
		for range 4 {
			w.book("dc-link", "payments", "gone") // orphaned, retained
		}
	})
	with, rep := steady(func(w *world) {
		var rs []*ipam.Grant
		for _, name := range []string{"converged", "old-ccm", "stuck", "released"} {
			rs = append(rs, w.book("dc-link", "payments", name))
			svc := w.admitted(name, rs[len(rs)-1])
			switch name {
			case "converged":
				w.serve(svc, "lb-1", true)
			case "old-ccm":
				w.serve(svc, "lb-2", false)
			case "stuck":
				w.serve(svc, "lb-3", false)
				_ = w.Srv.Attach(rs[len(rs)-1].ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-9"})
			case "released":
				_ = w.Cloud.ReleaseIP(context.Background(), rs[len(rs)-1].ID)
			}
		}
	})
	for _, r := range []string{ReasonNotAttached, ReasonAttachedElsewhere, ReasonGone} {
		if rep.NotConverged[r] != 1 {
			t.Fatalf("the counted cycle did not judge every cause: %v", rep.NotConverged)
		}
	}
	if len(with) == 0 || len(with) != len(without) {
		t.Fatalf("calls of a cycle: %v with Services to monitor, %v without", with, without)
	}
	for op, n := range without {
		if with[op] != n {
			t.Fatalf("calls of a cycle: %v with Services to monitor, %v without", with, without)
		}
	}
}

func TestClassify(t *testing.T) {
	addr := netip.MustParseAddr("172.16.35.200")
	lb := "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
	on := func(typ, id string) *scaleway.IP {
		return &scaleway.IP{ID: "ip", Address: addr, Resource: &scaleway.Resource{Type: typ, ID: id}}
	}
	svc := func(ann map[string]string, ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{request.AnnotationAddresses: addr.String()}}}
		for k, v := range ann {
			s.Annotations[k] = v
		}
		for _, in := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return s
	}
	private := map[string]string{ccm.AnnotationLoadBalancerID: "fr-par-1/" + strings.ToUpper(lb), ccm.AnnotationPrivate: "true"}
	public := map[string]string{ccm.AnnotationLoadBalancerID: "fr-par-1/" + lb}
	hostname := map[string]string{ccm.AnnotationLoadBalancerID: lb, ccm.AnnotationPrivate: "true", ccm.AnnotationUseHostname: "true"}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		ip   *scaleway.IP
		byo  bool
		want string
	}{
		{"applied, private", svc(private, "172.16.0.9", addr.String()), on(scaleway.ResourceLoadBalancer, lb), false, ConvergenceApplied},
		{"no Load Balancer yet", svc(nil), &scaleway.IP{ID: "ip", Address: addr}, false, ConvergencePending},
		{"gone, before the Load Balancer too", svc(nil), nil, false, ReasonGone},
		{"not ours: never listed", svc(nil), nil, true, ""},
		{"not admitted with a reservation", &corev1.Service{}, nil, false, ""},
		{"not attached", svc(private), &scaleway.IP{ID: "ip", Address: addr}, false, ReasonNotAttached},
		{"another Load Balancer", svc(private, addr.String()), on(scaleway.ResourceLoadBalancer, "other"), false, ReasonAttachedElsewhere},
		{"another kind of resource, same ID", svc(private, addr.String()), on("instance_server", lb), false, ReasonAttachedElsewhere},
		{"private, not in status", svc(private, "172.16.0.9"), on(scaleway.ResourceLoadBalancer, lb), false, ReasonNotInStatus},
		// The CCM writes public IPs or hostnames there: nothing to expect.
		{"public: status holds public IPs", svc(public, "51.15.0.1"), on(scaleway.ResourceLoadBalancer, lb), false, ConvergenceApplied},
		{"use-hostname", svc(hostname), on(scaleway.ResourceLoadBalancer, lb), false, ConvergenceApplied},
		{"IPv6: the CCM lists IPv4 only", svc(private), &scaleway.IP{ID: "ip", Address: netip.MustParseAddr("fd00::5"), Resource: &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: lb}}, false, ConvergenceApplied},
	} {
		if got := Classify(TargetOf(servicecache.NewRecord(tc.svc)), tc.ip, tc.byo); got != tc.want {
			t.Errorf("%s: Classify = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The gauge exists from the start, every reason at 0, before any cycle.
func TestNotConvergedGaugeExportedFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	n, err := testutil.GatherAndCount(reg, "scw_lb_ipam_services_not_converged")
	if err != nil || n != len(Reasons()) {
		t.Fatalf("%d series (%v), want %d", n, err, len(Reasons()))
	}
}

// The note of an Event is capped at 1024 bytes by events.k8s.io/v1 (a
// longer one is rejected and the Event lost): two IPs fit whole, eight of
// mixed reasons and long names are cut, on a line and within UTF-8, and
// the lines that remain still read back as their keys.
func TestNoteFitsTheEventsAPI(t *testing.T) {
	const lb = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
	target := Target{LoadBalancerID: lb, StatusListsPrivateIPs: true}
	id := func(i int) string { return fmt.Sprintf("%08d-7e00-441f-bfda-b6bdcb8ecc5f", i) }
	two := []finding{{id: id(1), address: "172.16.35.200", reason: ReasonNotAttached}, {id: id(2), address: "172.16.35.201", reason: ReasonNotAttached}}
	n := note(target, two, 7*time.Minute)
	if len(n) > noteLengthLimit || strings.HasSuffix(n, "…") || strings.Count(n, "["+ReasonNotAttached+"] Load Balancer") != 1 {
		t.Fatalf("%d bytes, want the whole note with one fix per reason:\n%s", len(n), n)
	}
	if got, want := parseNote(n), causeOf(two); got != want {
		t.Fatalf("parseNote = %q, want %q", got, want)
	}

	long := strings.Repeat("k8s-é-", 40)
	var eight []finding
	for i, r := range []string{ReasonNotAttached, ReasonAttachedElsewhere, ReasonGone, ReasonNotInStatus, ReasonAttachedElsewhere, ReasonNotAttached, ReasonGone, ReasonAttachedElsewhere} {
		f := finding{id: id(i), address: fmt.Sprintf("172.16.35.%d", 200+i), reason: r}
		switch r {
		case ReasonAttachedElsewhere:
			f.resource = &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: id(100 + i), Name: long}
		case ReasonNotInStatus:
			f.resource = &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: lb}
		}
		eight = append(eight, f)
	}
	n = note(target, eight, 7*time.Minute)
	if len(n) > noteLengthLimit || !utf8.ValidString(n) {
		t.Fatalf("%d bytes (valid UTF-8 %v), want at most %d:\n%s", len(n), utf8.ValidString(n), noteLengthLimit, n)
	}
	all := strings.Split(causeOf(eight), ",")
	read := parseNote(n)
	if read == "" {
		t.Fatalf("no line read back from:\n%s", n)
	}
	for _, k := range strings.Split(read, ",") {
		if !slices.Contains(all, k) {
			t.Fatalf("read back %q, not one of %v", k, all)
		}
	}
	// Eight with the names the CCM gives: every line whole, the fixes in
	// the runbook.
	short := slices.Clone(eight)
	for i := range short {
		if short[i].resource != nil {
			short[i].resource = &scaleway.Resource{Type: short[i].resource.Type, ID: short[i].resource.ID, Name: "k8s-api-previous"}
		}
	}
	n = note(target, short, 7*time.Minute)
	if len(n) > noteLengthLimit || parseNote(n) != causeOf(short) || !strings.Contains(n, "ScwLbIpamServicesNotConverged") {
		t.Fatalf("%d bytes, want every line and the runbook's name:\n%s", len(n), n)
	}
	for _, limit := range []int{40, 41, 42, 43} { // any cut lands outside a rune
		if cut := truncateNote(strings.Repeat("é", 100), limit); len(cut) > limit || !utf8.ValidString(cut) {
			t.Fatalf("truncateNote(%d) = %q", limit, cut)
		}
	}

	// Through the monitor: eight IPs of one Service, one Event that fits.
	w := newWorld(t)
	s, ev := w.monitored()
	var rs []*ipam.Grant
	for i := range 8 {
		rs = append(rs, w.book("dc-link", "payments", fmt.Sprintf("api-%d", i)))
	}
	svc := w.admitted("api", rs...)
	w.serve(svc, lb, false)
	for i, r := range rs {
		switch i % 3 {
		case 1:
			if err := w.Srv.Attach(r.ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: id(100 + i), Name: long}); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := w.Cloud.ReleaseIP(context.Background(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.cycles(s, 10)
	got := notApplied(ev)
	if len(got) != 1 {
		t.Fatalf("events %v", got)
	}
	if _, text, _ := strings.Cut(got[0], ": "); len(text) > noteLengthLimit {
		t.Fatalf("a note of %d bytes is rejected by events.k8s.io/v1:\n%s", len(text), text)
	}
}

// A stuck previous Load Balancer is finally deleted: the IP is attached to
// nothing while the CCM backs off before its next sync. That new cause
// gets its own grace: no false not_attached Event, and the gauge leaves
// attached_elsewhere at once.
func TestGraceRestartsWhenTheCauseChanges(t *testing.T) {
	w := newWorld(t)
	s, ev := w.monitored()
	r := w.book("dc-link", "payments", "api")
	svc := w.admitted("api", r)
	w.serve(svc, "lb-new", false)
	if err := w.Srv.Attach(r.ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-old", Name: "k8s-api-previous"}); err != nil {
		t.Fatal(err)
	}
	w.cycles(s, 10)
	if got := notApplied(ev); len(got) != 1 || !strings.Contains(got[0], "["+ReasonAttachedElsewhere+"]") {
		t.Fatalf("events %v", got)
	}
	wantGauge(t, s, map[string]float64{ReasonAttachedElsewhere: 1})

	if err := w.Srv.Detach(r.ID); err != nil { // lb-old deleted at last
		t.Fatal(err)
	}
	w.cycles(s, 4) // the CCM's back-off, under 300 s
	if got := notApplied(ev); len(got) != 1 {
		t.Fatalf("a false Event while the CCM backs off: %v", got[1:])
	}
	wantGauge(t, s, nil)
	w.serve(svc, "lb-new", true)
	w.cycles(s, 10)
	if got := notApplied(ev); len(got) != 1 {
		t.Fatalf("events %v", got)
	}
	wantGauge(t, s, nil)
}

// storedEvents records Events as the events.k8s.io/v1 recorder does, into
// a client the next leader lists them from.
type storedEvents struct {
	t     *testing.T
	kube  client.Client
	clock interface{ Now() time.Time }
	n     int
}

func (e *storedEvents) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	svc := regarding.(*corev1.Service)
	e.n++
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("%s.%d", svc.Name, e.n)},
		Regarding:  corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID},
		EventTime:  metav1.NewMicroTime(e.clock.Now()), Type: eventtype, Reason: reason, Action: action,
		Note: fmt.Sprintf(note, args...), ReportingController: "scw-lb-ipam-sweeper",
	}
	if err := e.kube.Create(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
}

func (e *storedEvents) list(t *testing.T) []eventsv1.Event {
	t.Helper()
	var l eventsv1.EventList
	if err := e.kube.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// A new leader term rebuilds the monitor's memory from the IPNotApplied
// Events: a Service the previous leader reported is counted at once and
// not given the same Event again; what the replica remembered from an
// earlier term of its own is dropped.
func TestLeaderTermRestoresTheMonitor(t *testing.T) {
	w := newWorld(t)
	store := fixtures.FakeKube().
		WithIndex(&eventsv1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*eventsv1.Event).Reason} }).Build()
	rec := &storedEvents{t: t, kube: store, clock: w.Clock}
	leader := func() *Sweeper {
		return w.sweeper(func(o *Options) {
			o.Recorder, o.Events, o.Metrics, o.ConvergenceGrace = rec, store, NewMetrics(prometheus.NewRegistry()), testGrace
		})
	}
	a, b := w.book("dc-link", "payments", "old-ccm"), w.book("dc-link", "payments", "stuck")
	old := w.admitted("old-ccm", a)
	w.serve(old, "lb-1", false)
	stuck := w.admitted("stuck", b)
	w.serve(stuck, "lb-2", false)
	if err := w.Srv.Attach(b.ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-9", Name: "previous"}); err != nil {
		t.Fatal(err)
	}
	first := leader()
	w.cycles(first, 10)
	if n := len(rec.list(t)); n != 2 {
		t.Fatalf("%d Events, want 2", n)
	}

	// Another replica wins the Lease: its term starts with the Events.
	second := leader()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Start restores, runs one cycle, and ends with its term
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep := w.cycles(second, 1)
	if rep.NotConverged[ReasonNotAttached] != 1 || rep.NotConverged[ReasonAttachedElsewhere] != 1 {
		t.Fatalf("the new leader's first cycle: %v, want both Services counted at once", rep.NotConverged)
	}
	wantGauge(t, second, map[string]float64{ReasonNotAttached: 1, ReasonAttachedElsewhere: 1})
	w.cycles(second, 10)
	if n := len(rec.list(t)); n != 2 {
		t.Fatalf("%d Events after the failover, want the 2 of the first leader: %v", n, rec.list(t))
	}

	// The first replica leads again, after the stuck Load Balancer moved
	// on to another holder and its Event expired: its old memory is not
	// trusted, the new cause gets its grace and its Event.
	for _, e := range rec.list(t) {
		if e.Regarding.Name == "stuck" {
			if err := store.Delete(context.Background(), &e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := first.notConverged[stuck.UID]; ok {
		t.Fatal("the memory of an earlier term survived into a new one")
	}
	w.cycles(first, 10)
	if n := len(rec.list(t)); n != 2 {
		t.Fatalf("%d Events, want old-ccm's and stuck's new one: %v", n, rec.list(t))
	}
}

// The listing filters on our cluster tag: an IP re-tagged out of band
// (Terraform, the console) is missing from it but not gone. It is read
// once past the grace, and judged from that read; before the grace, no
// call is made.
func TestGoneConfirmedByOneReadPastTheGrace(t *testing.T) {
	w := newWorld(t)
	s, ev := w.monitored()
	r := w.book("dc-link", "payments", "api")
	svc := w.admitted("api", r)
	w.serve(svc, "lb-1", true)
	w.cycles(s, 2)
	if _, err := w.Cloud.SetTags(context.Background(), r.ID, []string{"managed-by=terraform"}); err != nil {
		t.Fatal(err)
	}
	w.Srv.ResetCounts()
	w.cycles(s, int(testGrace/time.Minute))
	if n := w.Srv.Count(emulator.OpGetIP); n != 0 {
		t.Fatalf("%d GetIP within the grace, want none", n)
	}
	w.cycles(s, 1)
	if n := w.Srv.Count(emulator.OpGetIP); n != 1 {
		t.Fatalf("%d GetIP once past the grace, want 1", n)
	}
	w.cycles(s, 10)
	if got := notApplied(ev); len(got) != 0 {
		t.Fatalf("an IP that exists and is applied reported: %v", got)
	}
	wantGauge(t, s, nil)
}

// A Service whose reservation is attached to its own Load Balancer named
// for another UID (the CCM synced a copy of an earlier Service of its
// name, or an ID was restored) is warned: the CCM will leave that Load
// Balancer, and the address attached, at the Service's deletion. Its own
// Load Balancer, or one it manages itself, is not.
func TestLoadBalancerNotNamedForServiceWarned(t *testing.T) {
	w := newWorld(t)
	s, ev := w.monitored()
	r := w.book("dc-link", "payments", "api")
	svc := w.admitted("api", r)
	w.serve(svc, "lb-1", true)
	w.cycles(s, 2)
	if got := ev.of(EventReasonLoadBalancerNotNamedForService); len(got) != 0 {
		t.Fatalf("warned about its own Load Balancer: %v", got)
	}
	// The Load Balancer the ID names was made for the Service's previous life.
	if err := w.Srv.Detach(r.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.Srv.Attach(r.ID, emulator.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1", Name: "k8s-uid-payments-api-previous"}); err != nil {
		t.Fatal(err)
	}
	w.cycles(s, 1)
	got := ev.of(EventReasonLoadBalancerNotNamedForService)
	if len(got) != 1 || !strings.Contains(got[0], "Warning LoadBalancerNotNamedForService payments/api: IPAM IP "+r.ID) ||
		!strings.Contains(got[0], "the CCM will not delete it with this Service") {
		t.Fatalf("want one warning naming %s, got %v", r.ID, ev.list)
	}
	w.edit(svc, func(s *corev1.Service) { s.Annotations[ccm.AnnotationExternallyManaged] = "true" })
	w.cycles(s, 1)
	if got := ev.of(EventReasonLoadBalancerNotNamedForService); len(got) != 1 {
		t.Fatalf("warned about an externally managed Load Balancer: %v", got)
	}
}
