package app

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// callMetrics counts Scaleway API calls by operation and HTTP status
// ("0" when no answer came) and times them.
type callMetrics struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newCallMetrics(reg prometheus.Registerer) *callMetrics {
	m := &callMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scw_lb_ipam_scaleway_calls_total",
			Help: "Scaleway API calls by operation and HTTP status (0: no answer).",
		}, []string{"operation", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scw_lb_ipam_scaleway_call_duration_seconds",
			Help:    "Duration of Scaleway API calls by operation.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation"}),
	}
	reg.MustRegister(m.calls, m.latency)
	return m
}

func (m *callMetrics) observe(op string, status int, d time.Duration) {
	m.calls.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
