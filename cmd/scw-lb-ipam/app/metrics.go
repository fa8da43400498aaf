package app

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
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

// poolCollector reports the pools' occupancy at scrape time from the
// allocator's views, which it refreshes in the background: a scrape never
// calls Scaleway.
type poolCollector struct {
	alloc *ipam.Allocator
	desc  map[string]*prometheus.Desc
}

func newPoolCollector(alloc *ipam.Allocator) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("scw_lb_ipam_pool_"+name, help, []string{"pool"}, nil)
	}
	return &poolCollector{alloc: alloc, desc: map[string]*prometheus.Desc{
		"total":           d("addresses_total", "Addresses the pool can hand out (0: too wide to count)."),
		"used_by_cluster": d("addresses_used_by_cluster", "Addresses reserved by this cluster, retained ones included."),
		"used_by_others":  d("addresses_used_by_others", "Addresses held by other clusters, resources or people."),
		"retained":        d("addresses_retained", "This cluster's reservations no Service uses, kept for their retention."),
		"free":            d("addresses_free", "Addresses free to hand out."),
	}}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.alloc.Stats() {
		if !st.Known {
			continue // not listed yet: no number beats a wrong one
		}
		for key, v := range map[string]uint64{"total": st.Total, "used_by_cluster": st.UsedByCluster, "used_by_others": st.UsedByOthers, "retained": st.Retained, "free": st.Free} {
			ch <- prometheus.MustNewConstMetric(c.desc[key], prometheus.GaugeValue, float64(v), st.Pool)
		}
	}
}
