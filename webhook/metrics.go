package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the admission webhook, registered once per process.
type Metrics struct {
	admissions *prometheus.CounterVec
	latency    *prometheus.HistogramVec
}

// NewMetrics creates and registers the admission metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scw_lb_ipam_admissions_total",
			Help: "Service admissions by operation and result (skipped, patched, allowed, restored, dry_run, denied, errored).",
		}, []string{"operation", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scw_lb_ipam_admission_duration_seconds",
			Help:    "Time to answer a Service admission, Scaleway calls included.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation"}),
	}
	reg.MustRegister(m.admissions, m.latency)
	return m
}

func (m *Metrics) observeAdmission(op, result string, d time.Duration) {
	m.admissions.WithLabelValues(op, result).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
