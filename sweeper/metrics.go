package sweeper

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the sweeper.
type Metrics struct {
	orphans  *prometheus.GaugeVec
	releases prometheus.Counter
	// early counts releases a full pool brought forward (release-at), by
	// pool: retention promises the pool could not keep.
	early  *prometheus.CounterVec
	would  prometheus.Gauge
	errors prometheus.Counter
	cycle  prometheus.Histogram
	// unreserved counts live LoadBalancer Services that should hold a
	// reservation and do not (let through by failurePolicy Ignore, say).
	unreserved prometheus.Gauge
	// outOfScope counts this cluster's tagged IPs outside every pool's
	// subnet, which the sweeper leaves alone.
	outOfScope prometheus.Gauge
	// notConverged counts live Services whose reserved IPs are not applied
	// past the convergence grace, by reason.
	notConverged *prometheus.GaugeVec
	// stranded counts reservations no live Service references still
	// attached to a Load Balancer past the convergence grace.
	stranded prometheus.Gauge
	// viewWrites counts the view's writes (Options.View), by what they
	// wrote: an idle cycle adds none.
	viewWrites *prometheus.CounterVec
}

// The values of scw_lb_ipam_view_writes_total's label what.
var viewWriteKinds = []string{"object", "deletion", "service_conditions", "failed"}

// NewMetrics creates and registers the sweeper metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		orphans: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scw_lb_ipam_sweeper_orphans", Help: "Reservations no live Service references, by pool, at the last cycle.",
		}, []string{"pool"}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scw_lb_ipam_sweeper_releases_total", Help: "Reservations released by the sweeper.",
		}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scw_lb_ipam_sweeper_early_releases_total", Help: "Retained reservations released before their retention ended because their pool, or their namespace's share of it, was full, by pool.",
		}, []string{"pool"}),
		// A gauge set each cycle, not a counter: the same held-back IPs come
		// back every cycle, so a running sum would count them again and again.
		would: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scw_lb_ipam_sweeper_would_release", Help: "Reservations the last cycle would have released but held back (report-only mode or the per-cycle cap).",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scw_lb_ipam_sweeper_errors_total", Help: "Failed sweeper steps (API errors, unsynced cache).",
		}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "scw_lb_ipam_sweeper_cycle_duration_seconds", Help: "Duration of sweeper cycles.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		unreserved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scw_lb_ipam_unreserved_services", Help: "LoadBalancer Services in opted-in namespaces that ask for a reserved IP (or fall under a default pool) but carry none, at the last cycle.",
		}),
		outOfScope: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scw_lb_ipam_sweeper_out_of_scope", Help: "IPs tagged with this cluster's name outside every pool's subnet at the last cycle (another cluster with the same clusterName, or a removed pool's network): never touched unless --release-removed-pools.",
		}),
		notConverged: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scw_lb_ipam_services_not_converged", Help: "Live LoadBalancer Services whose reserved IPs are not applied on their Load Balancer past the convergence grace, by likely cause, at the last cycle (not_attached: the CCM ignored private-ip-ids, older than v0.36.0; attached_elsewhere: held by another resource; gone_from_ipam: released or deleted out of band; not_in_status: not in status.loadBalancer.ingress).",
		}, []string{"reason"}),
	}
	m.stranded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "scw_lb_ipam_sweeper_stranded", Help: "Reservations no live Service references that stay attached to a Load Balancer past the convergence grace, at the last cycle: the CCM did not delete that Load Balancer (its Service is gone) or detach the IP; never released while attached.",
	})
	m.viewWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scw_lb_ipam_view_writes_total", Help: "Writes of the view by the sweeper's leader, by what they wrote: object (an IPPool or IPReservation created or changed), deletion (one released or gone), service_conditions (a Service's Reserved and Applied conditions changed), failed (retried at the next cycle). An idle cycle writes nothing.",
	}, []string{"what"})
	// Every reason from the start, at 0: an alert on the series must not
	// wait for a first cycle, and absent is not the same as none.
	for _, r := range reasons {
		m.notConverged.WithLabelValues(r)
	}
	for _, w := range viewWriteKinds {
		m.viewWrites.WithLabelValues(w)
	}
	reg.MustRegister(m.orphans, m.releases, m.early, m.would, m.errors, m.cycle, m.unreserved, m.outOfScope, m.notConverged, m.stranded, m.viewWrites)
	return m
}

func (m *Metrics) observeCycle(d time.Duration, r Report) {
	m.cycle.Observe(d.Seconds())
	m.releases.Add(float64(len(r.Released)))
	for pool, n := range r.EarlyReleased {
		m.early.WithLabelValues(pool).Add(float64(n))
	}
	m.errors.Add(float64(r.Errors))
	for i, n := range []int{r.View.Objects, r.View.Deleted, r.View.Services, r.View.Errors} {
		m.viewWrites.WithLabelValues(viewWriteKinds[i]).Add(float64(n))
	}
}

// setCycle exports what a completed cycle saw: the orphans by pool, the
// releases it held back and the unreserved Services.
func (m *Metrics) setCycle(byPool map[string]int, r Report) {
	m.would.Set(float64(len(r.WouldRelease)))
	m.unreserved.Set(float64(r.Unreserved))
	m.outOfScope.Set(float64(r.OutOfScope))
	m.stranded.Set(float64(r.Stranded))
	for _, reason := range reasons {
		m.notConverged.WithLabelValues(reason).Set(float64(r.NotConverged[reason]))
	}
	m.orphans.Reset()
	for pool, n := range byPool {
		m.orphans.WithLabelValues(pool).Set(float64(n))
	}
}
