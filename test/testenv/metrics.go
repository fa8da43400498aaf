package testenv

import (
	"net/url"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/ccmprocess"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/oldccm"
)

// Observer reads what the webhook did: its calls in the emulator's request
// log and the replicas' metrics. Env embeds it, so that a test reads
// env.Gauge(...) as before.
type Observer struct {
	emu      *emulator.Server
	replicas []*Replica
}

// WebhookCalls are the emulator's calls since the request log held from
// entries, per operation, less the CCM's, the console's and
// /metadata.
func (o *Observer) WebhookCalls(from int) map[emulator.Op]int {
	out := map[emulator.Op]int{}
	for _, r := range o.WebhookRequests(from) {
		out[r.Op]++
	}
	return out
}

// WebhookRequests are the emulator's requests since entry from that the
// webhook made: routed, not /metadata, not the CCM's nor the
// console's.
func (o *Observer) WebhookRequests(from int) []emulator.Request {
	reqs := o.emu.Requests()
	// Requests returns a copy: filtering it in place is safe.
	return slices.DeleteFunc(reqs[min(from, len(reqs)):], func(r emulator.Request) bool {
		return r.Op == "" || r.Op == emulator.OpMetadata || IsCCM(r) || strings.Contains(r.UserAgent, ConsoleUserAgent)
	})
}

// IsCCM reports whether r is a call of the CCM: the real one's, or
// RunOldCCM's fake's.
func IsCCM(r emulator.Request) bool {
	return strings.Contains(r.UserAgent, ccmprocess.UserAgent) || strings.Contains(r.UserAgent, oldccm.UserAgent)
}

// CallsFor are the webhook's calls since entry from that were made on
// behalf of svc: every booking, a query naming its ledger tag, or a call
// about an IP whose tags name it. Background listings by cluster tag (the
// index refresh, the sweeper) and calls about other IPs are left out.
func (o *Observer) CallsFor(from int, svc types.NamespacedName) map[emulator.Op]int {
	tag := ipam.ServiceTag(svc)
	out := map[emulator.Op]int{}
	for _, r := range o.WebhookRequests(from) {
		query, _ := url.QueryUnescape(r.Path)
		ip, known := o.emu.IP(r.IPID)
		if r.Op == emulator.OpBookIP || strings.Contains(query, tag) || known && slices.Contains(ip.Tags, tag) {
			out[r.Op]++
		}
	}
	return out
}

// Gather returns every replica's metric families, one after the other:
// callers sum what they read.
func (o *Observer) Gather() []*dto.MetricFamily {
	var out []*dto.MetricFamily
	for _, r := range o.replicas {
		out = append(out, r.gather()...)
	}
	return out
}

// Counter sums a counter family over its labels and the replicas (0 when
// absent).
func (o *Observer) Counter(name string) float64 {
	total := 0.0
	for _, f := range o.Gather() {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// Creates is the number of CREATE admissions the replicas answered (the
// CCM's patches are UPDATEs).
func (o *Observer) Creates() float64 { return creates(o.Gather()) }

// Creates is the number of CREATE admissions this replica answered.
func (r *Replica) Creates() float64 { return creates(r.gather()) }

func creates(families []*dto.MetricFamily) float64 {
	total := 0.0
	for _, f := range families {
		if f.GetName() != "scw_lb_ipam_admissions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == "CREATE" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// Total sums a gauge family over its labels and the replicas, -1 when
// absent.
func (o *Observer) Total(name string) float64 {
	total, found := 0.0, false
	for _, f := range o.Gather() {
		if f.GetName() == name {
			found = true
			for _, m := range f.GetMetric() {
				total += m.GetGauge().GetValue()
			}
		}
	}
	if !found {
		return -1
	}
	return total
}

// Gauge reads a gauge's series whose labels include the given name/value
// pairs, e.g. Gauge("scw_lb_ipam_pool_addresses", "pool", "dc-link",
// "state", "total"), from the first replica that has it; -1 when absent.
func (o *Observer) Gauge(name string, labels ...string) float64 {
	if len(labels)%2 != 0 {
		panic("testenv.Gauge: labels are name/value pairs")
	}
	for _, f := range o.Gather() {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Gauges are every series of gauge name of this replica, by their labels
// ("pool=dc-link,state=free").
func (r *Replica) Gauges(name string) map[string]float64 {
	out := map[string]float64{}
	for _, f := range r.gather() {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetGauge().GetValue()
		}
	}
	return out
}
