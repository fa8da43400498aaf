package sweeper

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// BenchmarkSweepCycle10k is one steady-state cycle over 10,000 reservations
// of this cluster: 9,900 referenced by live Services, 100 past retention and
// released. It reports the API calls the cycle makes; the design budgets
// ≤ 5 s and ⌈N/page⌉ list calls plus one re-read and one release per release.
func BenchmarkSweepCycle10k(b *testing.B) {
	const n, orphans = 10_000, 100
	w := newWorld(b)
	edge := w.PNs["edge"].ID
	ctx := context.Background()
	seed := func() {
		old := w.Clock.Now().Add(-48 * time.Hour)
		for i := range n {
			addr := netip.AddrFrom4([4]byte{10, 10, byte(1 + i/250), byte(1 + i%250)})
			name := fmt.Sprint("svc-", i)
			e := ipam.Entry{Cluster: "prod", Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: name}, UID: "uid-" + name}
			if i < orphans {
				e.OrphanedSince = old
			}
			id, err := w.Srv.AddIP(edge, addr, e.Tags(), nil)
			if err != nil {
				b.Fatal(err)
			}
			if i >= orphans {
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{ccm.AnnotationPrivateIPIDs: id}},
					Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
				}
				if err := w.Kube.Create(ctx, svc); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	seed()
	s := w.sweeper(func(o *Options) { o.MaxReleasesPerCycle = 2 * orphans })
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i > 0 { // put the released ones back
			for j := range orphans {
				addr := netip.AddrFrom4([4]byte{10, 10, byte(1 + j/250), byte(1 + j%250)})
				name := fmt.Sprint("svc-", j)
				e := ipam.Entry{Cluster: "prod", Pool: "general", Service: types.NamespacedName{Namespace: "payments", Name: name}, UID: "uid-" + name, OrphanedSince: w.Clock.Now().Add(-48 * time.Hour)}
				if _, err := w.Srv.AddIP(edge, addr, e.Tags(), nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		w.Srv.ResetCounts()
		start := time.Now()
		b.StartTimer()
		rep, err := s.Sweep(ctx)
		b.StopTimer()
		if err != nil || len(rep.Released) != orphans || rep.Scanned != n {
			b.Fatalf("cycle: %+v %v", rep, err)
		}
		wall := time.Since(start)
		b.ReportMetric(float64(w.Srv.Count(emulator.OpListIPs)), "list-calls/op")
		b.ReportMetric(float64(w.Srv.Count(emulator.OpGetIP)+w.Srv.Count(emulator.OpReleaseIP)), "release-calls/op")
		b.ReportMetric(float64(w.Srv.Count(emulator.OpUpdateIP)), "tag-calls/op")
		b.ReportMetric(wall.Seconds(), "wall-s/op")
		b.StartTimer()
	}
}
