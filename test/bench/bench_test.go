package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// rssEnv names a file holding BenchmarkWebhookRSS's output (test/chart);
// make bench runs that first and sets it, and the report prints it beside
// the burst it measures.
const rssEnv = "SCW_LB_IPAM_BENCH_RSS"

// report gathers the table and the goals as the phases measure them.
type report struct {
	b     *testing.B
	env   *testenv.Env
	kube  client.Client
	out   strings.Builder
	goals []goal
}

// goal is one of the targets, with what was measured against it.
type goal struct {
	what, measured, mark string
}

func (r *report) printf(format string, args ...any) { fmt.Fprintf(&r.out, format, args...) }

// check records a goal and returns the mark printed next to its row.
func (r *report) check(what string, met bool, measured string) string {
	r.goals = append(r.goals, goal{what: what, measured: measured, mark: mark(met)})
	return mark(met)
}

// checkInterval records a goal "at most limit" on a value known within
// [lo, hi]: met or missed only when the whole interval says so. A run
// whose noise is wider than the goal's margin says it cannot tell.
func (r *report) checkInterval(what string, lo, hi, limit time.Duration, measured string) string {
	m := "[UNCLEAR]"
	switch {
	case hi <= limit:
		m = mark(true)
	case lo > limit:
		m = mark(false)
	}
	r.goals = append(r.goals, goal{what: what, measured: measured, mark: m})
	return m
}

func mark(met bool) string {
	if met {
		return "[met]"
	}
	return "[MISSED]"
}

// BenchmarkReport runs every measurement once and prints the table; run it
// with -benchtime=1x (make bench does).
func BenchmarkReport(b *testing.B) {
	r := startReport(b)
	defer r.env.Stop()
	r.printf("scw-lb-ipam benchmarks — %s, %d cores, %s; real kube-apiserver and etcd, 2 replicas in process, emulator over HTTP\n\n",
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cpuModel())

	for _, phase := range []struct {
		name string
		run  func()
	}{
		{"calls per admission", r.callsPerAdmission},
		{"create latency", r.latency},
		{"concurrent creates", r.burst},
		{"sweeper cycles", r.sweeper},
		{"free-address pick", r.pick},
		{"view", r.viewRows},
	} {
		start := time.Now()
		phase.run()
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", phase.name, time.Since(start).Round(time.Millisecond))
	}
	r.printf("Goals\n")
	for _, g := range r.goals {
		r.printf("  %-9s %s: %s\n", g.mark, g.what, g.measured)
	}
	fmt.Print("\n" + r.out.String())
}

// BenchmarkCalls prints the table of Scaleway calls per admission alone,
// full pools and shares included, on a control plane of its own: a change
// to what an admission calls is measured in a few minutes. Run it with
// -benchtime=1x.
func BenchmarkCalls(b *testing.B) { alone(b, (*report).callsPerAdmission) }

// BenchmarkLatency prints the create latency rows, their overheads and
// goals alone, on a control plane of its own: a change to the admission
// path or to a baseline webhook is measured without the rest of the table.
// Run it with -benchtime=1x.
func BenchmarkLatency(b *testing.B) { alone(b, (*report).latency) }

// BenchmarkBackfill prints the uid back-fill's rows and goal alone, on a
// control plane of their own: a change to the back-fill is measured in a
// few minutes. Run it with -benchtime=1x.
func BenchmarkBackfill(b *testing.B) { alone(b, (*report).backfillRows) }

// alone runs one phase of the report on a control plane of its own and
// prints its rows and goals.
func alone(b *testing.B, phase func(*report)) {
	r := startReport(b)
	defer r.env.Stop()
	phase(r)
	for _, g := range r.goals {
		r.printf("  %-9s %s: %s\n", g.mark, g.what, g.measured)
	}
	fmt.Print("\n" + r.out.String())
}

// startReport starts the control plane, the emulator and the replicas the
// measurements share.
func startReport(b *testing.B) *report {
	env, err := testenv.Start(testenv.Options{
		PrivateNetworks: append([]string{"nodes=172.16.0.0/22", "dc=172.16.32.0/20", "edge=10.10.0.0/16"}, yieldNetworks()...),
		// dc-link's ranges hold what the measurements book in it (~1,800).
		PoolFile: `clusterName: bench
region: fr-par
clusterPrivateNetworkID: {{nodes}}
pools:
  - {name: dc-link, privateNetworkID: {{dc}}, ranges: ["172.16.33.0-172.16.46.255"]}
  - {name: general, privateNetworkID: {{edge}}}
` + yieldPools(),
		Namespaces: map[string]bool{"opted": true, "plain": false},
		Args:       []string{"--sweep-interval", "1h"},
		// The admission path alone: no Load Balancers made meanwhile.
		NoCCM: true,
		// Room for the ~14,000 Services the measurements create.
		APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/16"},
	})
	if err != nil {
		b.Fatal(err)
	}
	kube, err := env.Client(nil)
	if err != nil {
		env.Stop()
		b.Fatal(err)
	}
	return &report{b: b, env: env, kube: kube}
}

// BenchmarkSweeper prints the sweeper's rows and goal alone: the emulator
// and the child, no control plane, so a change to the cycle or to what the
// cache holds is measured in a minute. Run it with -benchtime=1x.
func BenchmarkSweeper(b *testing.B) {
	r := &report{b: b}
	r.sweeper()
	for _, g := range r.goals {
		r.printf("  %-9s %s: %s\n", g.mark, g.what, g.measured)
	}
	fmt.Print("\n" + r.out.String())
}

// noop is the baseline webhook's handler: it allows, with no patch and no
// Scaleway call, behind the same server, TLS and deadline as the mutator.
type noop struct{}

func (noop) Handle(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
}

// waiting is a no-op webhook that waits d before it allows: the baseline
// of a handler that only waits on its Scaleway calls, with no patch, no
// call and no work: what waiting alone costs through the apiserver, which
// ours − no-op − calls × latency would otherwise count as the handler's.
type waiting struct{ d atomic.Int64 }

func (w *waiting) Handle(ctx context.Context, _ admission.Request) admission.Response {
	w.pause(ctx)
	return admission.Allowed("")
}

func (w *waiting) pause(ctx context.Context) {
	select {
	case <-time.After(time.Duration(w.d.Load())):
	case <-ctx.Done():
	}
}

func svc(ns, name string, ann map[string]string) *corev1.Service {
	noNodePorts := false // thousands of Services would exhaust the node port range
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}, AllocateLoadBalancerNodePorts: &noNodePorts}}
}

// histogram returns a histogram family's sum (seconds) and count, over
// labels and replicas.
func histogram(env *testenv.Env, name string) (sum float64, count uint64) {
	for _, f := range env.Gather() {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return sum, count
}

// sweeper: one cycle over 10,000 and one over 100,000 reservations, 1% of
// them past retention, each in a child process.
func (r *report) sweeper() {
	r.printf("Sweeper cycle in a child process, the emulator in this one (1%% of the reservations past retention, the rest referenced)\n")
	r.printf("  %-13s %8s %15s %16s %9s %18s %23s %8s\n", "reservations", "wall", "ListIPs (goal)", "GetIP+ReleaseIP", "UpdateIP", "peak RSS (growth)", "before: RSS (live heap)", "emu CPU")
	for _, n := range []int{10_000, 100_000} {
		row, err := sweepCycle(n, n/100)
		if err != nil {
			r.b.Fatal(err)
		}
		pages := (n + scaleway.DefaultPageSize - 1) / scaleway.DefaultPageSize
		lists := row.counts[emulator.OpListIPs]
		res := row.res
		line := fmt.Sprintf("  %-13s %8s %7d (%5d) %16d %9d %7.0f MB (+%4.0f) %11.0f MB (%4.0f MB) %8s", thousands(n), res.Wall.Round(time.Millisecond), lists, pages,
			row.counts[emulator.OpGetIP]+row.counts[emulator.OpReleaseIP], row.counts[emulator.OpUpdateIP], mb(res.HWM), mb(res.HWM)-mb(res.RSSBefore),
			mb(res.RSSBefore), mb(res.HeapBefore), row.emulatorCPU.Round(10*time.Millisecond))
		if n == 100_000 {
			met := res.Wall <= 10*time.Second && res.HWM <= 200e6 && lists == pages
			line += "  " + r.check("sweeper over 100,000 reservations ≤ 10 s, ≤ 200 MB RSS (the sweeper's process alone), ⌈N/100⌉ list calls", met,
				fmt.Sprintf("%s, %.0f MB peak RSS, %d list calls for ⌈N/100⌉ = %d", res.Wall.Round(time.Millisecond), mb(res.HWM), lists, pages))
		}
		r.printf("%s\n", line)
		if !res.HWMReset {
			r.printf("  (VmHWM could not be reset: the peak above includes building the Service list)\n")
		}
	}
	r.printf("  The child holds what the leader would: the Cloud client, the pool file, and the live Services as the Service informer\n")
	r.printf("  holds them (a served LoadBalancer Service as the apiserver returns it, made a servicecache.Record by servicecache.RecordService, the\n")
	r.printf("  informer's transform), built before the cycle, which lowers the GC percent as production's does:\n")
	r.printf("  \"before\" is them and the runtime. Peak RSS is the kernel's VmHWM over the cycle alone, growth its excess over\n")
	r.printf("  \"before\". emu CPU is this process's CPU while the child ran: the emulator answering.\n\n")
}

// pick: the free-address pick on a 95%-full /16.
func (r *report) pick() {
	var bld netipx.IPSetBuilder
	bld.AddRange(netipx.IPRangeFrom(netip.MustParseAddr("10.20.0.2"), netip.MustParseAddr("10.20.255.253")))
	include, _ := bld.IPSet()
	empty, _ := (&netipx.IPSetBuilder{}).IPSet()
	space, _ := addrspace.New(include, empty)
	// 95% used, scattered: a stride coprime with the size visits each
	// candidate once.
	base := uint32(10)<<24 | 20<<16 | 2
	for i := uint64(0); space.Used() < space.Size()*95/100; i++ {
		k := uint32((i * 7919) % space.Size())
		v := base + k
		space.Mark(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}))
	}
	// Timed by hand: testing.Benchmark cannot run inside a benchmark.
	const picks = 200_000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for range picks {
		a, err := space.Pick()
		if err != nil {
			panic(err)
		}
		space.Mark(a)
		space.Unmark(a)
	}
	per := time.Since(start) / picks
	runtime.ReadMemStats(&m1)
	r.printf("Free-address pick on a 95%%-full /16 (%d of %d used): %s per pick, %d allocs per pick  %s\n\n",
		space.Used(), space.Size(), per, (m1.Mallocs-m0.Mallocs)/picks,
		r.check("pick on a 95%-full /16 ≤ 1 ms", per <= time.Millisecond, per.String()))
}

func mb(b uint64) float64 { return float64(b) / 1e6 }

// thousands formats n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "model name") {
			return strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
		}
	}
	return "unknown CPU"
}
