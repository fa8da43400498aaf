package app

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
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

// setupMetricsWithManager registers the pool gauges' collector, which
// reads the Inventory's background listing of the pools' subnets at scrape
// time (admissions read that listing too, and rarely pay for one). The
// endpoint itself is the manager's (metricsServerOptions); each component
// registers its own metrics.
func setupMetricsWithManager(reg prometheus.Registerer, inv *inventory.Inventory) error {
	return reg.Register(newPoolCollector(inv.Stats, time.Now))
}

// poolStates are the values of the pool gauge's state label, in the order
// they are exported. used_by_cluster counts retained reservations too.
var poolStates = []string{"total", "used_by_cluster", "used_by_others", "free", "retained"}

// poolCollector reports the pools' occupancy at scrape time from the
// allocator's views, which it refreshes in the background: a scrape never
// calls Scaleway. One gauge, scw_lb_ipam_pool_addresses{pool,state}: the
// states count one thing, a pool's addresses, so they share a name and a
// label tells them apart; a _total suffix would say counter (Prometheus
// naming). The states overlap (used_by_cluster includes retained): never
// sum over state.
//
// scw_lb_ipam_index_age_seconds{pool} is how old the listing behind both
// the gauge and the pool's reservation index is: it grows past
// --index-refresh-interval only while listings fail, and past
// --occupancy-ttl every pool CREATE pays an extra listing.
type poolCollector struct {
	stats func() []ipam.PoolStats
	now   func() time.Time
	desc  *prometheus.Desc
	age   *prometheus.Desc
}

func newPoolCollector(stats func() []ipam.PoolStats, now func() time.Time) *poolCollector {
	return &poolCollector{stats: stats, now: now,
		desc: prometheus.NewDesc("scw_lb_ipam_pool_addresses", poolAddressesHelp, []string{"pool", "state"}, nil),
		age: prometheus.NewDesc("scw_lb_ipam_index_age_seconds", "Seconds since this replica last listed the pool's subnet: "+
			"the age of its occupancy view and of its reservation index of this cluster's IPs.", []string{"pool"}, nil)}
}

const poolAddressesHelp = "Addresses of a pool by state: total it can hand out (0: too wide to count), " +
	"used_by_cluster (reserved by this cluster, retained ones included), used_by_others (other clusters, " +
	"resources or people), free to hand out, retained (this cluster's reservations no Service uses, kept " +
	"for their retention)."

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.age }

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.stats() {
		if !st.Known {
			continue // not listed yet: no number beats a wrong one
		}
		values := map[string]uint64{"total": st.Total, "used_by_cluster": st.UsedByCluster, "used_by_others": st.UsedByOthers, "free": st.Free, "retained": st.Retained}
		for _, state := range poolStates {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(values[state]), st.Pool, state)
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, c.now().Sub(st.Listed).Seconds(), st.Pool)
	}
}
