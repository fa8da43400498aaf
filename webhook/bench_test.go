package webhook

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// BenchmarkCreateThroughHTTP is one pool CREATE as a replica serves it:
// the AdmissionReview over HTTP to the webhook's handler, metrics on, the
// BookIP over HTTP to the emulator, the patch back. What a CREATE costs
// with the CPU to itself; make bench's latency rows add what waiting for a
// CPU beside kube-apiserver and etcd costs.
func BenchmarkCreateThroughHTTP(b *testing.B) {
	// The pool (IPAM chooses, on a /24) holds 253 addresses: a fresh
	// harness, outside the timer, every 200 CREATEs.
	const perHarness = 200
	pool := map[string]string{request.AnnotationPool: "general"}
	var h *harness
	for i := range b.N {
		if i%perHarness == 0 {
			b.StopTimer()
			h = newHarness(b)
			h.mutator.Metrics = NewMetrics(prometheus.NewRegistry())
			// The first admission of a replica lists the pool's subnet.
			if resp, _, err := h.sendRaw(review(admissionv1.Create, fixtures.Service("payments", "warm", pool), nil, false)); err != nil || resp == nil || !resp.Allowed {
				b.Fatalf("the first CREATE: %v, %+v", err, resp)
			}
			b.StartTimer()
		}
		resp, _, err := h.sendRaw(review(admissionv1.Create, fixtures.Service("payments", fmt.Sprint("api-", i), pool), nil, false))
		if err != nil || resp == nil || !resp.Allowed || len(resp.Patch) == 0 {
			b.Fatalf("CREATE %d: %v, %+v", i, err, resp)
		}
	}
}
