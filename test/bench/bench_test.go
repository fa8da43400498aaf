package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/scaleway/scaleway-sdk-go/scw"
	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/addrspace"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/sweeper"
)

// BenchmarkReport runs every measurement once and prints the table; run it
// with -benchtime=1x (make bench does).
func BenchmarkReport(b *testing.B) {
	env, err := testenv.Start(testenv.Options{
		PrivateNetworks: []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/20", "edge=10.10.0.0/20"},
		PoolFile: func(pns map[string]ipamtest.PrivateNetwork) string {
			return fmt.Sprintf(`clusterName: bench
region: fr-par
clusterPrivateNetworkID: %s
pools:
  - {name: dc-link, privateNetworkID: %s, ranges: ["172.16.33.0-172.16.40.255"]}
  - {name: general, privateNetworkID: %s}
`, pns["nodes"].ID, pns["dc"].ID, pns["edge"].ID)
		},
		Namespaces: map[string]bool{"opted": true, "plain": false},
		Args:       []string{"--sweep-interval", "1h"},
		// The admission path alone: no Load Balancers made meanwhile.
		NoCCM: true,
		// Room for the ~2,000 Services the measurements create.
		APIServerFlags: map[string]string{"service-cluster-ip-range": "10.96.0.0/16"},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Stop()
	kube, err := env.Client(nil)
	if err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "scw-lb-ipam benchmarks — %s, %d cores, %s; real kube-apiserver and etcd, emulator over HTTP\n\n", runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cpuModel())

	for _, phase := range []struct {
		name string
		run  func()
	}{
		{"calls per admission", func() { callsPerAdmission(b, env, kube, &out) }},
		{"create latency", func() { latency(b, env, kube, &out) }},
		{"concurrent creates", func() { burst(b, env, kube, &out) }},
		{"sweeper cycle", func() { sweepCycle(b, &out) }},
		{"free-address pick", func() { pick(&out) }},
	} {
		start := time.Now()
		phase.run()
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", phase.name, time.Since(start).Round(time.Millisecond))
	}
	fmt.Print("\n" + out.String())
}

func svc(ns, name string, ann map[string]string) *corev1.Service {
	noNodePorts := false // thousands of Services would exhaust the node port range
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}, AllocateLoadBalancerNodePorts: &noNodePorts}}
}

func calls(env *testenv.Env) (total int, detail string) {
	var parts []string
	counts := env.Emu.Counts()
	keys := make([]string, 0, len(counts))
	for op := range counts {
		keys = append(keys, string(op))
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n := counts[ipamtest.Op(k)]; n > 0 && ipamtest.Op(k) != ipamtest.OpMetadata {
			total += n
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return total, strings.Join(parts, " ")
}

// callsPerAdmission counts the Scaleway calls of one Service create by kind
// of request, in steady state (the pools' listings refreshed beforehand).
func callsPerAdmission(b *testing.B, env *testenv.Env, kube client.Client, out *strings.Builder) {
	ctx := context.Background()
	byo, _ := env.Emu.AddIP(env.PNs["edge"].ID, netip.MustParseAddr("10.10.9.9"), nil, nil)
	fmt.Fprintln(out, "Scaleway calls per admission (one Service create)")
	fmt.Fprintf(out, "  %-40s %6s  %s\n", "request", "calls", "by operation")
	row := func(name string, do func() error) {
		time.Sleep(200 * time.Millisecond) // let background listings settle
		env.Emu.ResetCounts()
		if err := do(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		n, d := calls(env)
		fmt.Fprintf(out, "  %-40s %6d  %s\n", name, n, d)
	}
	row("pool with ranges (we pick)", func() error {
		return kube.Create(ctx, svc("opted", "c1", map[string]string{ccm.AnnotationPool: "dc-link"}))
	})
	row("pool without ranges (IPAM chooses)", func() error {
		return kube.Create(ctx, svc("opted", "c2", map[string]string{ccm.AnnotationPool: "general"}))
	})
	row("specific address", func() error {
		return kube.Create(ctx, svc("opted", "c3", map[string]string{ccm.AnnotationAddress: "172.16.34.77"}))
	})
	row("two pools", func() error {
		return kube.Create(ctx, svc("opted", "c4", map[string]string{ccm.AnnotationPool: "dc-link,general"}))
	})
	row("bring-your-own IPAM ID", func() error {
		return kube.Create(ctx, svc("opted", "c5", map[string]string{ccm.AnnotationIPAMIDs: byo}))
	})
	row("dry run", func() error {
		return kube.Create(ctx, svc("opted", "c6", map[string]string{ccm.AnnotationPool: "dc-link"}), client.DryRunAll)
	})
	row("re-create within retention (sticky)", func() error {
		if err := kube.Delete(ctx, svc("opted", "c1", nil)); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
		return kube.Create(ctx, svc("opted", "c1", map[string]string{ccm.AnnotationPool: "dc-link"}))
	})
	row("namespace not opted in", func() error {
		return kube.Create(ctx, svc("plain", "c7", map[string]string{ccm.AnnotationPool: "dc-link"}))
	})
	fmt.Fprintln(out)
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// latency: p50/p99 of sequential creates through the apiserver.
func latency(b *testing.B, env *testenv.Env, kube client.Client, out *strings.Builder) {
	ctx := context.Background()
	const n = 200
	measure := func(ns, prefix string, ann map[string]string) []time.Duration {
		d := make([]time.Duration, 0, n)
		for i := range n {
			s := svc(ns, fmt.Sprintf("%s-%d", prefix, i), ann)
			start := time.Now()
			if err := kube.Create(ctx, s); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		return d
	}
	fmt.Fprintln(out, "Service create latency through the apiserver (200 sequential creates each)")
	fmt.Fprintf(out, "  %-14s %-28s %9s %9s\n", "emulator", "namespace", "p50", "p99")
	for _, lat := range []time.Duration{0, 20 * time.Millisecond} {
		env.Emu.SetLatency("", lat)
		handler0, handlerN := histogram(env, "scw_lb_ipam_admission_duration_seconds")
		scw0, scwN := histogram(env, "scw_lb_ipam_scaleway_call_duration_seconds")
		tag := strconv.Itoa(int(lat / time.Millisecond))
		plain := measure("plain", "lat"+tag, map[string]string{ccm.AnnotationPool: "dc-link"})
		opted := measure("opted", "lat"+tag, map[string]string{ccm.AnnotationPool: "dc-link"})
		// The admission's own calls (the first table): one sticky lookup and
		// one booking; background listings do not delay admissions.
		const perCreate = 2.0
		p50p, p99p, p50o, p99o := percentile(plain, .5), percentile(plain, .99), percentile(opted, .5), percentile(opted, .99)
		fmt.Fprintf(out, "  %-14s %-28s %9s %9s\n", lat.String()+" per call", "not opted in", p50p.Round(10*time.Microsecond), p99p.Round(10*time.Microsecond))
		fmt.Fprintf(out, "  %-14s %-28s %9s %9s\n", "", "opted in, pool", p50o.Round(10*time.Microsecond), p99o.Round(10*time.Microsecond))
		emulated := time.Duration(perCreate * float64(lat))
		fmt.Fprintf(out, "  %-14s %-28s %9s %9s   (difference minus %.1f calls × %s of emulated API time)\n", "", "webhook's own overhead",
			(p50o - p50p - emulated).Round(10*time.Microsecond), (p99o - p99p - emulated).Round(10*time.Microsecond), perCreate, lat)
		h1, hn := histogram(env, "scw_lb_ipam_admission_duration_seconds")
		s1, sn := histogram(env, "scw_lb_ipam_scaleway_call_duration_seconds")
		handler := (h1 - handler0) / float64(hn-handlerN)
		scwCalls := (s1 - scw0) / float64(hn-handlerN)
		fmt.Fprintf(out, "  %-14s %-28s mean %s in the handler, of which %s in Scaleway calls over HTTP (%.1f per admission)\n", "", "where the time goes",
			time.Duration(handler*float64(time.Second)).Round(10*time.Microsecond), time.Duration(scwCalls*float64(time.Second)).Round(10*time.Microsecond), float64(sn-scwN)/float64(hn-handlerN))
	}
	env.Emu.SetLatency("", 0)
	fmt.Fprintln(out)
}

// histogram returns a histogram family's sum (seconds) and count, over labels.
func histogram(env *testenv.Env, name string) (sum float64, count uint64) {
	families := env.Gather()
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return sum, count
}

// burst: 500 concurrent creates, opted in vs not.
func burst(b *testing.B, env *testenv.Env, kube client.Client, out *strings.Builder) {
	ctx := context.Background()
	const n = 500
	run := func(ns string) (rate float64, errs int, dup int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		seen := map[string]bool{}
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				s := svc(ns, fmt.Sprintf("burst-%d", i), map[string]string{ccm.AnnotationPool: "dc-link"})
				err := kube.Create(ctx, s)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs++
					return
				}
				if id := s.Annotations[ccm.AnnotationPrivateIPIDs]; id != "" {
					if seen[id] {
						dup++
					}
					seen[id] = true
				}
			})
		}
		wg.Wait()
		return float64(n) / time.Since(start).Seconds(), errs, dup
	}
	plainRate, plainErrs, _ := run("plain")
	optRate, optErrs, dups := run("opted")
	fmt.Fprintln(out, "500 concurrent creates")
	fmt.Fprintf(out, "  not opted in: %7.1f creates/s, %d errors\n", plainRate, plainErrs)
	fmt.Fprintf(out, "  opted in:     %7.1f creates/s, %d errors, %d duplicate IPs  (%.2f× the rate without the webhook; goal ≥ 0.5×)\n", optRate, optErrs, dups, optRate/plainRate)
	fmt.Fprintln(out)
}

// sweepCycle: one sweeper cycle over 10,000 reservations.
func sweepCycle(b *testing.B, out *strings.Builder) {
	const n, orphans = 10_000, 100
	emu := ipamtest.New(ipamtest.Options{SecretKey: testenv.SecretKey})
	if _, err := emu.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer emu.Close()
	nodes, _ := emu.AddPrivateNetwork("nodes", "172.16.0.0/22")
	edge, _ := emu.AddPrivateNetwork("edge", "10.20.0.0/16")
	cloud, err := scaleway.New(context.Background(), scaleway.Options{Region: "fr-par", ClientOptions: []scw.ClientOption{
		scw.WithAPIURL(emu.URL()), scw.WithAuth(testenv.AccessKey, testenv.SecretKey), scw.WithDefaultProjectID(ipamtest.DefaultProjectID)}})
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := ipam.ParseConfig([]byte(fmt.Sprintf("clusterName: bench\nregion: fr-par\nclusterPrivateNetworkID: %s\npools:\n  - {name: general, privateNetworkID: %s, retention: 1h}\n", nodes.ID, edge.ID)))
	if err != nil {
		b.Fatal(err)
	}
	if err := cfg.Resolve(context.Background(), cloud); err != nil {
		b.Fatal(err)
	}
	var live corev1.ServiceList
	old := time.Now().Add(-2 * time.Hour)
	for i := range n {
		name := fmt.Sprint("svc-", i)
		e := ipam.Entry{Cluster: "bench", Pool: "general", Service: types.NamespacedName{Namespace: "ns", Name: name}, UID: "uid-" + name}
		if i < orphans {
			e.OrphanedSince = old
		}
		id, err := emu.AddIP(edge.ID, netip.AddrFrom4([4]byte{10, 20, byte(1 + i/250), byte(1 + i%250)}), e.Tags(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if i >= orphans {
			live.Items = append(live.Items, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
				Annotations: map[string]string{ccm.AnnotationPrivateIPIDs: id}}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}})
		}
	}
	s := sweeper.New(sweeper.Options{Cloud: cloud, Config: func() *ipam.Config { return cfg }, Services: listReader{&live}, MaxReleasesPerCycle: 1000, Log: logr.Discard()})
	emu.ResetCounts()
	runtime.GC()
	before := hwm()
	start := time.Now()
	rep, err := s.Sweep(context.Background())
	wall := time.Since(start)
	if err != nil || len(rep.Released) != orphans {
		b.Fatalf("cycle: %+v %v", rep, err)
	}
	fmt.Fprintln(out, "Sweeper cycle over 10,000 reservations (9,900 referenced, 100 past retention)")
	fmt.Fprintf(out, "  wall time %s, ListIPs calls %d (page %d; ⌈N/page⌉ = %d), GetIP+ReleaseIP %d, UpdateIP %d\n",
		wall.Round(time.Millisecond), emu.Count(ipamtest.OpListIPs), scaleway.DefaultPageSize, (n+scaleway.DefaultPageSize-1)/scaleway.DefaultPageSize, emu.Count(ipamtest.OpGetIP)+emu.Count(ipamtest.OpReleaseIP), emu.Count(ipamtest.OpUpdateIP))
	fmt.Fprintf(out, "  peak RSS of the process %d MB (%d MB before the cycle; the emulator and its 10,000 IPs live in it too); goal ≤ 5 s, ≤ 150 MB\n\n", hwm()>>20, before>>20)
}

// listReader serves a fixed Service list, as the informer cache would.
type listReader struct{ list *corev1.ServiceList }

func (l listReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("not supported")
}

func (l listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	l.list.DeepCopyInto(list.(*corev1.ServiceList))
	return nil
}

// hwm is the process's peak resident set size.
func hwm() uint64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseUint(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// pick: the free-address pick on a 95%-full /16.
func pick(out *strings.Builder) {
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
	fmt.Fprintf(out, "Free-address pick on a 95%%-full /16 (%d of %d used): %s per pick, %d allocs per pick (goal ≤ 1 ms)\n",
		space.Used(), space.Size(), per, (m1.Mallocs-m0.Mallocs)/picks)
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
