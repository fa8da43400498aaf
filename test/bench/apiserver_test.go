package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// apiserverTimes are sums and counts of the kube-apiserver's own
// histograms that split a Service create: its call to our webhook, and the
// rest of the POST (apiserver_request_sli_duration_seconds leaves webhook
// time out). They tell what a webhook costs the apiserver from what the
// machine adds around it, with far less noise than a create's latency: the
// latency of a create is mostly etcd and the ClusterIP allocation.
type apiserverTimes struct {
	webhookSum, restSum     float64 // seconds
	webhookCount, restCount float64
}

func (a apiserverTimes) sub(b apiserverTimes) apiserverTimes {
	return apiserverTimes{a.webhookSum - b.webhookSum, a.restSum - b.restSum, a.webhookCount - b.webhookCount, a.restCount - b.restCount}
}

func (a apiserverTimes) add(b apiserverTimes) apiserverTimes {
	return apiserverTimes{a.webhookSum + b.webhookSum, a.restSum + b.restSum, a.webhookCount + b.webhookCount, a.restCount + b.restCount}
}

func (a apiserverTimes) webhook() time.Duration { return mean(a.webhookSum, a.webhookCount) }
func (a apiserverTimes) rest() time.Duration    { return mean(a.restSum, a.restCount) }

func mean(sum, count float64) time.Duration {
	if count == 0 {
		return 0
	}
	return time.Duration(sum / count * float64(time.Second))
}

// readAPIServerTimes scrapes the apiserver's /metrics.
func readAPIServerTimes(c rest.Interface) (apiserverTimes, error) {
	raw, err := c.Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return apiserverTimes{}, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return apiserverTimes{}, fmt.Errorf("parsing the apiserver's metrics: %w", err)
	}
	var t apiserverTimes
	for _, m := range fams["apiserver_admission_webhook_admission_duration_seconds"].GetMetric() {
		if labels(m.GetLabel())["operation"] == "CREATE" {
			t.webhookSum += m.GetHistogram().GetSampleSum()
			t.webhookCount += float64(m.GetHistogram().GetSampleCount())
		}
	}
	for _, m := range fams["apiserver_request_sli_duration_seconds"].GetMetric() {
		if l := labels(m.GetLabel()); l["verb"] == "POST" && l["resource"] == "services" && l["group"] == "" {
			t.restSum += m.GetHistogram().GetSampleSum()
			t.restCount += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return t, nil
}

func labels(ls []*dto.LabelPair) map[string]string {
	out := make(map[string]string, len(ls))
	for _, l := range ls {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
