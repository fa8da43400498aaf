package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// callCount is the Scaleway calls the emulator received since its counts
// were reset, /metadata aside (the SDK's, once per client).
func callCount(emu *emulator.Server) (total int, detail string) {
	counts := emu.Counts()
	ops := make([]string, 0, len(counts))
	for op, n := range counts {
		if n > 0 && op != emulator.OpMetadata {
			ops = append(ops, string(op))
		}
	}
	sort.Strings(ops)
	for i, op := range ops {
		n := counts[emulator.Op(op)]
		total += n
		ops[i] = fmt.Sprintf("%s=%d", op, n)
	}
	return total, strings.Join(ops, " ")
}

// callsPerAdmission counts the Scaleway calls of one Service create by kind
// of request, in steady state: each kind is admitted once unmeasured first
// (the pools' listings are then fresh), and the row is the median of three
// measured creates, a background listing that falls inside one aside.
func (r *report) callsPerAdmission() {
	ctx := context.Background()
	const runs = 3
	var byo []string
	for i := range runs + 1 {
		id, err := r.env.Emu.AddIP(r.env.PNs["edge"].ID, netip.AddrFrom4([4]byte{10, 10, 9, byte(9 + i)}), nil, nil)
		if err != nil {
			r.b.Fatal(err)
		}
		byo = append(byo, id)
	}
	pool := func(p string) map[string]string { return map[string]string{request.AnnotationPool: p} }
	rows := []struct {
		name string
		goal int // -1: none
		// prepare, when set, runs before the counts are reset.
		prepare func(i int) error
		do      func(i int) error
	}{
		{"pool with ranges (we pick)", 1, nil, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-ranges-", i), pool("dc-link")))
		}},
		{"pool without ranges (IPAM chooses)", 1, nil, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-ipam-", i), pool("general")))
		}},
		{"specific address", 1, nil, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-address-", i), map[string]string{request.AnnotationAddress: fmt.Sprint("172.16.46.", 10+i)}))
		}},
		{"two pools (one IP each)", 2, nil, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-two-", i), pool("dc-link,general")))
		}},
		{"bring-your-own IPAM ID", -1, nil, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-byo-", i), map[string]string{request.AnnotationIPAMIDs: byo[i]}))
		}},
		{"dry run", -1, nil, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-dry-", i), pool("dc-link")), client.DryRunAll)
		}},
		{"re-create within retention (sticky)", -1, func(i int) error {
			name := fmt.Sprint("calls-sticky-", i)
			if err := r.kube.Create(ctx, svc("opted", name, pool("dc-link"))); err != nil {
				return err
			}
			return r.kube.Delete(ctx, svc("opted", name, nil))
		}, func(i int) error {
			return r.kube.Create(ctx, svc("opted", fmt.Sprint("calls-sticky-", i), pool("dc-link")))
		}},
		{"namespace not opted in", -1, nil, func(i int) error {
			return r.kube.Create(ctx, svc("plain", fmt.Sprint("calls-plain-", i), pool("dc-link")))
		}},
	}
	r.printf("Scaleway calls per admission: one Service CREATE in steady state, median of %d (each kind admitted once before)\n", runs)
	r.printf("  %-38s %5s  %-36s %s\n", "request", "calls", "by operation", "goal")
	var single []string
	allMet := true
	for _, row := range rows {
		type run struct {
			n      int
			detail string
		}
		var got []run
		for i := range runs + 1 {
			if row.prepare != nil {
				if err := row.prepare(i); err != nil {
					r.b.Fatalf("%s: %v", row.name, err)
				}
			}
			// Let the listings an admission starts in the background end.
			time.Sleep(300 * time.Millisecond)
			r.env.Emu.ResetCounts()
			if err := row.do(i); err != nil {
				r.b.Fatalf("%s: %v", row.name, err)
			}
			if n, d := callCount(r.env.Emu); i > 0 { // the first is the warm-up
				got = append(got, run{n, d})
			}
		}
		slices.SortFunc(got, func(a, b run) int { return a.n - b.n })
		med := got[len(got)/2]
		g := "—"
		if row.goal >= 0 {
			met := med.n == row.goal
			allMet = allMet && met
			g = fmt.Sprintf("%d  %s", row.goal, mark(met))
			single = append(single, fmt.Sprintf("%s %d", row.name, med.n))
		}
		r.printf("  %-38s %5d  %-36s %s\n", row.name, med.n, med.detail, g)
	}
	r.check("pool and address CREATEs make 1 Scaleway call per IP in steady state", allMet, strings.Join(single, ", "))
	r.fullPoolRows()
	r.printf("\n")
}

// latency: p50/p99 of sequential creates through the apiserver, without a
// webhook (a namespace not opted in: the apiserver does not call it), with
// the no-op webhook, the waiting no-op, the patch no-op (waits, then
// answers with a patch of ours' shape) and ours, at 0 and 20 ms of
// emulated Scaleway latency per call.
//
// The hooked rows run on one control plane in one run, in many short
// blocks taking turns: no-op, ours, patch no-op, waiting no-op, then the
// reverse, and again (the replicas restarted with the other handler in
// between, a few seconds each), and within a block each hooked create is
// paired with an un-webhooked one, in alternating order. The load of a shared 2-core
// machine comes and goes over seconds to minutes (another test suite, etcd
// compacting): with a few long blocks whichever row ran in a busy minute
// got its p99, and ours − no-op at p99 swung by tens of ms between runs.
// With many short blocks each row samples the same mix of busy and quiet
// moments, and the reversed turns give each the same mean position in the
// run, so that what drifts along it (the cluster's Services grow by
// thousands) weighs on every row alike: in a fixed order the waiting no-op
// at 0 ms, the no-op itself, measured 0.4 to 2.2 ms slower at p50 than
// the no-op in five runs. The difference of their percentiles measures
// the handler; its 90% interval, over the rounds, is printed beside it.
func (r *report) latency() {
	const (
		latencyBlocks = 40 // 10 rounds of the 4 kinds, half of them reversed
		warmup        = 10
	)
	// An array: a round's turn is a copy, reversed in place. Every round
	// runs one block of each kind, so block i of every kind is round i's.
	kinds := [...]string{"noop", "ours", "patch", "wait"}
	if latencyBlocks%len(kinds) != 0 {
		r.b.Fatalf("%d latency blocks are not whole rounds of the %d kinds", latencyBlocks, len(kinds))
	}
	lats := []time.Duration{0, 20 * time.Millisecond}
	pairsPerBlock := map[time.Duration]int{0: 100, 20 * time.Millisecond: 100}
	ctx := context.Background()
	type rows struct {
		none, noop, wait, patch, ours []time.Duration
		// blocks are each block's samples, by kind: the p50 differences
		// are taken against the paired un-webhooked creates block by
		// block, and the intervals are over rounds.
		blocks map[string]*pairedBlocks
	}
	samples := map[time.Duration]*rows{}
	// What ours spent, by latency: the replicas' histograms and the
	// emulator's log over the ours blocks.
	type spent struct {
		admissions, histCalls  uint64
		histSCW, histAdmission float64 // seconds
		calls                  emuCalls
	}
	use := map[time.Duration]*spent{}
	// The apiserver's own split of the hooked blocks, by latency and kind.
	api := map[time.Duration]map[string]apiserverTimes{}
	for _, lat := range lats {
		samples[lat], use[lat] = &rows{blocks: map[string]*pairedBlocks{"noop": {}, "wait": {}, "patch": {}, "ours": {}}}, &spent{calls: emuCalls{byKind: map[string]int{}}}
		api[lat] = map[string]apiserverTimes{}
	}
	metrics, err := kubernetes.NewForConfig(r.env.Config)
	if err != nil {
		r.b.Fatal(err)
	}
	apiserver := func() apiserverTimes {
		t, err := readAPIServerTimes(metrics.RESTClient())
		if err != nil {
			r.b.Fatal(err)
		}
		return t
	}
	wait := &waiting{}
	patch := r.newPatching()
	// kind is the block's webhook: its creates in the opted-in namespace
	// under the patch no-op must come back with the patch applied.
	var kind string
	seq := 0
	create := func(ns string) time.Duration {
		seq++
		s := svc(ns, fmt.Sprint("lat-", seq), map[string]string{request.AnnotationPool: "dc-link"})
		start := time.Now()
		if err := r.kube.Create(ctx, s); err != nil {
			r.b.Fatal(err)
		}
		took := time.Since(start)
		if kind == "patch" && ns == "opted" {
			if err := patch.applied(s); err != nil {
				r.b.Fatal(err)
			}
		}
		return took
	}
	var restarts time.Duration
	for blk := range latencyBlocks {
		turn := kinds
		if blk/len(turn)%2 == 1 {
			slices.Reverse(turn[:])
		}
		kind = turn[blk%len(turn)]
		ours := kind == "ours"
		var h admission.Handler = noop{}
		switch kind {
		case "ours":
			h = nil
		case "wait":
			h = wait
		case "patch":
			h = patch
		}
		start := time.Now()
		if err := r.env.RestartWebhook(h); err != nil {
			r.b.Fatal(err)
		}
		restarts += time.Since(start)
		// The first admissions of fresh replicas list the pool.
		for range warmup {
			create("opted")
			create("plain")
		}
		for _, lat := range lats {
			r.env.Emu.SetLatency("", lat)
			wait.d.Store(int64(lat))
			from := len(r.env.Emu.Requests())
			scw0, calls0 := histogram(r.env, "scw_lb_ipam_scaleway_call_duration_seconds")
			adm0, n0 := histogram(r.env, "scw_lb_ipam_admission_duration_seconds")
			rs := samples[lat]
			api0 := apiserver()
			hookedBlock, noneBlock := make([]time.Duration, 0, pairsPerBlock[lat]), make([]time.Duration, 0, pairsPerBlock[lat])
			for i := range pairsPerBlock[lat] {
				var hooked, none time.Duration
				if i%2 == 0 {
					hooked, none = create("opted"), create("plain")
				} else {
					none, hooked = create("plain"), create("opted")
				}
				rs.none = append(rs.none, none)
				hookedBlock, noneBlock = append(hookedBlock, hooked), append(noneBlock, none)
				switch kind {
				case "ours":
					rs.ours = append(rs.ours, hooked)
				case "wait":
					rs.wait = append(rs.wait, hooked)
				case "patch":
					rs.patch = append(rs.patch, hooked)
				default:
					rs.noop = append(rs.noop, hooked)
				}
			}
			rs.blocks[kind].add(hookedBlock, noneBlock)
			api[lat][kind] = api[lat][kind].add(apiserver().sub(api0))
			if ours {
				scw1, calls1 := histogram(r.env, "scw_lb_ipam_scaleway_call_duration_seconds")
				adm1, n1 := histogram(r.env, "scw_lb_ipam_admission_duration_seconds")
				u := use[lat]
				u.admissions += n1 - n0
				u.histCalls += calls1 - calls0
				u.histSCW += scw1 - scw0
				u.histAdmission += adm1 - adm0
				reqs := r.env.Emu.Requests()
				u.calls.note(reqs[:from])
				u.calls.add(reqs[from:])
			}
		}
		r.env.Emu.SetLatency("", 0)
	}
	fmt.Fprintf(os.Stderr, "bench: %d latency blocks, %s restarting the replicas\n", latencyBlocks, restarts.Round(time.Millisecond))

	r.printf("Service create latency through the apiserver: sequential creates, %d blocks taking turns (no-op, ours, patch no-op,\n", latencyBlocks)
	r.printf("waiting no-op, then the reverse), each hooked create paired with an un-webhooked one; samples per webhook row: %d at 0 ms,\n",
		latencyBlocks/len(kinds)*pairsPerBlock[0])
	r.printf("%d at 20 ms (%d times that without)\n", latencyBlocks/len(kinds)*pairsPerBlock[20*time.Millisecond], len(kinds))
	r.printf("  %-10s %-44s %10s %10s %10s\n", "emulator", "webhook", "p50", "p90", "p99")
	type pcts struct{ p50, p90, p99 time.Duration }
	stats := map[time.Duration]map[string]pcts{}
	for _, lat := range lats {
		rs := samples[lat]
		stats[lat] = map[string]pcts{}
		for i, row := range []struct {
			key, name string
			d         []time.Duration
		}{
			{"none", "none (namespace not opted in: not called)", rs.none},
			{"noop", "no-op webhook (allows, no patch, no call)", rs.noop},
			{"wait", "waiting no-op (waits the emulated latency)", rs.wait},
			{"patch", "patch no-op (one call, then a patch like ours)", rs.patch},
			{"ours", "ours (pool with ranges)", rs.ours},
		} {
			p := pcts{percentile(row.d, .50), percentile(row.d, .90), percentile(row.d, .99)}
			stats[lat][row.key] = p
			col := ""
			if i == 0 {
				col = fmt.Sprintf("%d ms/call", lat/time.Millisecond)
			}
			r.printf("  %-10s %-44s %10s %10s %10s\n", col, row.name, ms(p.p50), ms(p.p90), ms(p.p99))
		}
	}
	r.printf("\n")
	r.printf("Overheads (p50: each block's p50 less that of the un-webhooked creates paired with it, averaged over blocks, and\n")
	r.printf("a difference of two kinds taken round by round, its 90%% interval Student's t over the rounds; p99: differences of the\n")
	r.printf("rows above, the interval resampling whole rounds; means from the replicas' histograms and the emulator's log)\n")
	for _, lat := range lats {
		s, u := stats[lat], use[lat]
		adm := float64(max(u.admissions, 1))
		pathCalls := float64(u.calls.path) / adm
		pathTime := time.Duration(float64(u.calls.pathTime) / adm)
		emulated := time.Duration(pathCalls * float64(lat))
		col := fmt.Sprintf("%d ms/call", lat/time.Millisecond)
		bl := samples[lat].blocks
		r.printf("  %-10s %-50s %10s / %s\n", col, "apiserver webhook round trip (no-op − none)",
			ms(bl["noop"].overNone()), ms(s["noop"].p99-s["none"].p99))
		diff50, lo50, hi50 := pairedDiff(bl["ours"], bl["noop"])
		handler50, handler99 := diff50-emulated, s["ours"].p99-s["noop"].p99-emulated
		lo99, hi99 := bootstrapDiff(bl["ours"].hooked, bl["noop"].hooked, .99)
		line := fmt.Sprintf("  %-10s %-50s %10s / %s", "", fmt.Sprintf("our handler (ours − no-op − %.2f calls × %d ms)", pathCalls, lat/time.Millisecond), ms(handler50), ms(handler99))
		if lat == 0 {
			line += "   " + r.checkInterval("our handler's p99 over the no-op webhook ≤ 1 ms at 0 ms emulated latency (met or missed when its 90% interval is)",
				lo99-emulated, hi99-emulated, time.Millisecond, fmt.Sprintf("%s, 90%% interval %s … %s (ours p99 %s, no-op p99 %s)", ms(handler99), ms(lo99-emulated), ms(hi99-emulated), ms(s["ours"].p99), ms(s["noop"].p99)))
		}
		r.printf("%s\n", line)
		r.printf("  %-10s %-50s %s … %s / %s … %s\n", "", "  its 90% interval (over the rounds)",
			ms(lo50-emulated), ms(hi50-emulated), ms(lo99-emulated), ms(hi99-emulated))
		if lat == 0 {
			r.printf("  %-10s %-50s %10s   %s\n", "", "  p50 ≤ 1.5 ms", ms(handler50),
				r.checkInterval("at 0 ms emulated latency, ours p50 ≤ no-op p50 + 1.5 ms (met or missed when the 90% interval of ours − no-op, each against its paired un-webhooked creates, is)",
					lo50, hi50, 1500*time.Microsecond, fmt.Sprintf("%s, 90%% interval %s … %s", ms(handler50), ms(lo50), ms(hi50))))
		} else {
			waitDiff, _, _ := pairedDiff(bl["wait"], bl["noop"])
			waited := waitDiff - lat
			r.printf("  %-10s %-50s %10s / %s\n", "", fmt.Sprintf("a webhook that only waits (waiting no-op − no-op − %d ms)", lat/time.Millisecond),
				ms(waited), ms(s["wait"].p99-s["noop"].p99-lat))
			overWait, wlo, whi := pairedDiff(bl["ours"], bl["wait"])
			over := overWait - emulated + lat
			r.printf("  %-10s %-50s %10s   %s\n", "", "ours − waiting no-op (p50; 90% interval "+ms(wlo-emulated+lat)+" … "+ms(whi-emulated+lat)+")", ms(over),
				r.checkInterval(fmt.Sprintf("at %d ms emulated latency, ours p50 ≤ the waiting no-op's p50 + 2 ms (met or missed when the 90%% interval of ours − waiting no-op, each against its paired un-webhooked creates, is)", lat/time.Millisecond),
					wlo-emulated+lat, whi-emulated+lat, 2*time.Millisecond, fmt.Sprintf("%s, 90%% interval %s … %s; a webhook that only waits %d ms costs %s over the no-op's p50 + %d ms",
						ms(over), ms(wlo-emulated+lat), ms(whi-emulated+lat), lat/time.Millisecond, ms(waited), lat/time.Millisecond)))
		}
		r.patchRows(lat, emulated, bl)
		r.printf("  %-10s %-50s %10s mean per admission, in %.2f calls: %s\n", "", "Scaleway time on the admission path", ms(pathTime), pathCalls, u.calls.pathKinds(u.admissions))
		r.printf("  %-10s %-50s %s; %d BookIP conflicts (409)\n", "", "  besides, per admission (background)", u.calls.otherKinds(u.admissions), u.calls.conflicts)
		r.printf("  %-10s %-50s %10s mean in the handler, %s in %.2f Scaleway calls (the sweeper's included)\n", "", "  the replicas' histograms",
			ms(time.Duration(u.histAdmission/adm*float64(time.Second))), ms(time.Duration(u.histSCW/adm*float64(time.Second))), float64(u.histCalls)/adm)
		a := api[lat]
		r.printf("  %-10s %-50s no-op %s, waiting no-op %s, patch no-op %s, ours %s\n", "", "the apiserver's call to the webhook (its mean)",
			ms(a["noop"].webhook()), ms(a["wait"].webhook()), ms(a["patch"].webhook()), ms(a["ours"].webhook()))
		r.printf("  %-10s %-50s %10s   (a webhook that only waits: %s)\n", "", fmt.Sprintf("  in it, ours − no-op − %.2f calls × %d ms", pathCalls, lat/time.Millisecond),
			ms(a["ours"].webhook()-a["noop"].webhook()-emulated), ms(a["wait"].webhook()-a["noop"].webhook()-time.Duration(pathCalls*float64(lat))))
		r.printf("  %-10s %-50s no-op %s, waiting no-op %s, patch no-op %s, ours %s\n", "", "the rest of the apiserver's POSTs (its mean, both of a pair)",
			ms(a["noop"].rest()), ms(a["wait"].rest()), ms(a["patch"].rest()), ms(a["ours"].rest()))
		if lat == 20*time.Millisecond {
			r.printf("  %-10s %-50s %10s ≤ %s   %s\n", "", "ours − no-op (p50, paired) ≤ 20 ms + 2 ms", ms(diff50), ms(22*time.Millisecond),
				r.checkInterval("at 20 ms emulated latency, ours p50 ≤ no-op p50 + 20 ms + 2 ms (met or missed when the 90% interval of ours − no-op, each against its paired un-webhooked creates, is)",
					lo50, hi50, 22*time.Millisecond, fmt.Sprintf("ours − no-op %s, 90%% interval %s … %s (pooled rows: %s against %s + 22 ms)",
						ms(diff50), ms(lo50), ms(hi50), ms(s["ours"].p50), ms(s["noop"].p50))))
		}
	}
	r.printf("  At 0 ms per call, our handler's row includes the HTTP round trips to the emulator (the Scaleway time line).\n")
	r.printf("  The waiting no-op allows after waiting %d ms × the calls ours makes (1), with no patch and no call: what waiting alone\n", 20)
	r.printf("  costs through the apiserver on this machine, which ours − no-op − calls × latency counts as ours.\n")
	ops, size := patch.size()
	r.printf("  The patch no-op waits where ours does, on one HTTP call to the emulator (GET metadata, plain net/http, the same emulated\n")
	r.printf("  latency), then answers with a patch of ours' shape (%d operations, %d bytes: the operations and paths of the patch ours\n", ops, size)
	r.printf("  answered a Service of the pool with, each value as long as ours'), which the apiserver applies and stores (each of its\n")
	r.printf("  Services is checked): ours − waiting no-op counts the call's round trip and the patch as ours, ours − patch no-op does\n")
	r.printf("  not. Both are less (calls − 1) × latency: the no-ops wait one call's latency, ours as many as it makes.\n")
	r.printf("  The apiserver's means come from its own histograms: apiserver_admission_webhook_admission_duration_seconds (its call to\n")
	r.printf("  the webhook, hooked creates only) and apiserver_request_sli_duration_seconds (the POST without webhook time, over both\n")
	r.printf("  creates of each pair, so a change in the hooked ones shows at half its size there).\n")
	r.printf("  Admission path: BookIP, GetIP, and ListIPs filtered by a Service's tag; background: pool listings (the allocator's\n")
	r.printf("  refresh, or an admission's after conflicts), the sweeper's uid back-fill of each new Service (a GetIP of its new IP\n")
	r.printf("  and an UpdateIP) and its cycles' listings of the cluster (on deletions, and every hour here).\n\n")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// emuCalls sorts the emulator's requests by who makes them: the admission
// path, or the allocator's and the sweeper's background work.
type emuCalls struct {
	byKind    map[string]int
	path      int
	pathTime  time.Duration // at the emulator, emulated latency included
	conflicts int
	// booked are the IPs booked in the requests noted or added so far: a
	// GetIP of one of them is the sweeper's uid back-fill, not an
	// admission's. Admissions read a bring-your-own ID (never booked) or a
	// reservation to take back, and the rows counted with emuCalls create
	// fresh names only, which take nothing back.
	booked map[string]bool
}

// note records the bookings of reqs without counting them: the back-fill
// of an IP booked before the counted window runs in it.
func (e *emuCalls) note(reqs []emulator.Request) {
	if e.booked == nil {
		e.booked = map[string]bool{}
	}
	for _, req := range reqs {
		if req.Op == emulator.OpBookIP && req.IPID != "" {
			e.booked[req.IPID] = true
		}
	}
}

// kindBackfillGetIP is the sweeper's read of a new Service's IP.
const kindBackfillGetIP = "GetIP of a new IP (uid back-fill)"

func (e *emuCalls) add(reqs []emulator.Request) {
	// An IP's ID is known only once booked: noting the window's bookings
	// first marks no GetIP that came before its IP's.
	e.note(reqs)
	for _, req := range reqs {
		k, onPath := callKind(req)
		if k == "" {
			continue
		}
		if req.Op == emulator.OpGetIP && e.booked[req.IPID] {
			k, onPath = kindBackfillGetIP, false
		}
		e.byKind[k]++
		if onPath {
			e.path++
			e.pathTime += req.Duration
		}
		if req.Op == emulator.OpBookIP && req.Status == http.StatusConflict {
			e.conflicts++
		}
	}
}

// callKind names a request's kind, and tells whether admissions make it.
func callKind(req emulator.Request) (kind string, onPath bool) {
	switch req.Op {
	case "", emulator.OpMetadata:
		return "", false
	case emulator.OpBookIP, emulator.OpGetIP:
		return string(req.Op), true
	case emulator.OpListIPs:
		q := url.Values{}
		if u, err := url.Parse(req.Path); err == nil {
			q = u.Query()
		}
		for _, t := range q["tags"] {
			switch {
			case strings.HasPrefix(t, ipam.TagService):
				return "ListIPs by Service", true
			case strings.HasPrefix(t, ipam.TagCluster):
				return "ListIPs of the cluster", false
			}
		}
		return "ListIPs of a pool", false
	}
	return string(req.Op), false
}

func (e *emuCalls) pathKinds(admissions uint64) string  { return e.kinds(admissions, true) }
func (e *emuCalls) otherKinds(admissions uint64) string { return e.kinds(admissions, false) }

func (e *emuCalls) kinds(admissions uint64, onPath bool) string {
	onPathKinds := map[string]bool{string(emulator.OpBookIP): true, string(emulator.OpGetIP): true, "ListIPs by Service": true}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.byKind)) {
		if onPathKinds[k] == onPath {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(e.byKind[k])/float64(max(admissions, 1))))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// percentile interpolates between the two samples around rank p·(n−1).
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return sortedPercentile(s, p)
}

func sortedPercentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	rank := p * float64(len(s)-1)
	i := int(rank)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + time.Duration((rank-float64(i))*float64(s[i+1]-s[i]))
}

// pairedBlocks are the samples of one kind of hooked create, block by
// block, with the un-webhooked creates paired with them (the same
// moments' load).
type pairedBlocks struct{ hooked, none [][]time.Duration }

func (p *pairedBlocks) add(hooked, none []time.Duration) {
	p.hooked, p.none = append(p.hooked, hooked), append(p.none, none)
}

// overNone is the mean over blocks of the block's p50 less its paired
// un-webhooked creates' p50.
//
// Sequential creates slow down as the run goes: kube-apiserver's ClusterIP
// allocator counts every allocated address on each create (its profile
// puts ipallocator.(*Allocator).Used at 43% of its CPU), and the cluster
// grows by thousands of Services, so a block's p50 climbs from ~5 to ~30 ms
// over the run, and that drift, not the webhook, decided the difference of
// pooled p50s. The paired creates carry the same drift and the same
// moment's load; a block's p50 less theirs keeps only what the webhook
// adds.
func (p *pairedBlocks) overNone() time.Duration { return meanOf(p.blockDiffs()) }

func (p *pairedBlocks) blockDiffs() []time.Duration {
	out := make([]time.Duration, len(p.hooked))
	for i := range p.hooked {
		out[i] = percentile(p.hooked[i], .50) - percentile(p.none[i], .50)
	}
	return out
}

func meanOf(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}

// pairedDiff is a.overNone() − b.overNone() with its 90% interval, the
// paired Student's t interval over the rounds. Block i of every kind ran
// in round i, next to the others, so a round's difference a − b is taken
// first. What the webhook adds drifts along a run as the cluster grows (at
// 20 ms per call the block statistic of each webhook that waits climbed
// by 2.5 to 4 ms over ten rounds), alike in a round's blocks:
// resampling each kind's blocks on its own counted that drift as noise and
// gave an interval twice as wide (−0.82 … 0.98 ms against −0.31 … 0.53 ms
// for the same samples). With ten rounds, t's quantile (1.83) rather than
// a bootstrap's (which narrows as √(9/10)·1.64) keeps the interval from
// claiming more than ten numbers say.
func pairedDiff(a, b *pairedBlocks) (d, lo, hi time.Duration) {
	rounds := roundDiffs(a, b)
	if len(rounds) < 2 {
		panic(fmt.Sprintf("pairedDiff: %d rounds: an interval needs two", len(rounds)))
	}
	x := make([]float64, len(rounds))
	for i, r := range rounds {
		x[i] = float64(r)
	}
	mean, sd := stat.MeanStdDev(x, nil)
	n := float64(len(x))
	half := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(.95) * sd / math.Sqrt(n)
	return time.Duration(mean), time.Duration(mean - half), time.Duration(mean + half)
}

// roundDiffs are a − b round by round: block i of a less block i of b.
func roundDiffs(a, b *pairedBlocks) []time.Duration {
	da, db := a.blockDiffs(), b.blockDiffs()
	if len(da) != len(db) {
		panic(fmt.Sprintf("pairedDiff: %d blocks against %d: every round runs one block of each kind", len(da), len(db)))
	}
	out := make([]time.Duration, len(da))
	for i := range da {
		out[i] = da[i] - db[i]
	}
	return out
}

// turnMeans are the means of a − b over the rounds in the first order
// (even rounds) and in the reverse (odd): where one kind's block follows
// the other's in one order only, a gap between them beyond the rounds'
// noise is one block's work spilling into the next.
func turnMeans(a, b *pairedBlocks) (forward, reversed time.Duration) {
	var f, r []time.Duration
	for i, d := range roundDiffs(a, b) {
		if i%2 == 0 {
			f = append(f, d)
		} else {
			r = append(r, d)
		}
	}
	return meanOf(f), meanOf(r)
}

// bootstrapDiff is the 90% interval of percentile p of a minus that of b,
// over resamples of whole rounds: a resample draws rounds and pools the
// samples of a's block and of b's block in each. The samples of one block
// share its moment's load, so resampling them one by one would count them
// as independent and give too narrow an interval. The seed is fixed: the
// same samples give the same interval.
func bootstrapDiff(a, b [][]time.Duration, p float64) (lo, hi time.Duration) {
	const resamples = 2000
	if len(a) != len(b) {
		panic(fmt.Sprintf("bootstrapDiff: %d blocks against %d: every round runs one block of each kind", len(a), len(b)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	diffs := make([]time.Duration, resamples)
	var ra, rb []time.Duration
	for k := range diffs {
		ra, rb = ra[:0], rb[:0]
		for range a {
			i := rng.IntN(len(a))
			ra, rb = append(ra, a[i]...), append(rb, b[i]...)
		}
		slices.Sort(ra)
		slices.Sort(rb)
		diffs[k] = sortedPercentile(ra, p) - sortedPercentile(rb, p)
	}
	slices.Sort(diffs)
	return sortedPercentile(diffs, .05), sortedPercentile(diffs, .95)
}

// burst: 500 concurrent creates without a webhook, with the no-op one and
// with ours, at 0 ms emulated latency. The un-webhooked burst runs once
// beside each webhook's, and its rate is their mean.
func (r *report) burst() {
	const n = 500
	run := func(ns, prefix string) burstResult { return r.burstRun(ns, prefix, "dc-link", n) }
	warm := func(prefix string) { r.warm(prefix, "dc-link") }
	if err := r.env.RestartWebhook(nil); err != nil {
		r.b.Fatal(err)
	}
	warm("burst-warm-ours-")
	from := len(r.env.Emu.Requests())
	ours := run("opted", "burst-ours-")
	oursCalls := emuCalls{byKind: map[string]int{}}
	reqs := r.env.Emu.Requests()
	oursCalls.note(reqs[:from])
	oursCalls.add(reqs[from:])
	none1 := run("plain", "burst-none1-")
	if err := r.env.RestartWebhook(noop{}); err != nil {
		r.b.Fatal(err)
	}
	warm("burst-warm-noop-")
	nop := run("opted", "burst-noop-")
	none2 := run("plain", "burst-none2-")
	none := burstResult{rate: (none1.rate + none2.rate) / 2, errs: none1.errs + none2.errs, byKind: none1.byKind}
	for k, v := range none2.byKind {
		none.byKind[k] += v
	}
	dupIDs, dupAddrs := duplicates(r.b, r.kube)

	r.printf("%d concurrent creates (all released at once), 0 ms emulated latency; creates/s count the successful ones\n", n)
	r.printf("  %-44s %8.1f creates/s  %d errors  (%.1f and %.1f, one run beside each webhook's)\n", "none (namespace not opted in), mean of 2", none.rate, none.errs, none1.rate, none2.rate)
	r.printf("  %-44s %8.1f creates/s  %d errors  %.2f× none\n", "no-op webhook", nop.rate, nop.errs, nop.rate/none.rate)
	met := ours.rate >= 0.8*nop.rate && ours.errs == 0 && dupIDs+dupAddrs == 0
	r.printf("  %-44s %8.1f creates/s  %d errors  %.2f× none, %.2f× no-op; %d duplicate IPs  %s\n", "ours", ours.rate, ours.errs, ours.rate/none.rate, ours.rate/nop.rate, dupIDs+dupAddrs,
		r.check("500 concurrent creates ≥ 0.8× the no-op webhook's creates/s, 0 errors, 0 duplicate IPs", met,
			fmt.Sprintf("%.2f× (%.1f against %.1f creates/s), %d errors, %d duplicate IPs", ours.rate/nop.rate, ours.rate, nop.rate, ours.errs, dupIDs+dupAddrs)))
	r.printf("  %-44s %s; besides: %s; %d BookIP conflicts (409)\n", "  ours: the emulator's calls per create", oursCalls.pathKinds(n), oursCalls.otherKinds(n), oursCalls.conflicts)
	for _, e := range []struct {
		name string
		res  burstResult
	}{{"none", none}, {"no-op", nop}, {"ours", ours}} {
		for _, k := range slices.Sorted(maps.Keys(e.res.byKind)) {
			r.printf("  %-44s %d × %s\n", "  errors ("+e.name+")", e.res.byKind[k], k)
		}
	}
	r.printf("  duplicate IPs: IPAM IDs or addresses held by more than one Service of the opted-in namespace (every Service of the run)\n")
	if path := os.Getenv(rssEnv); path != "" {
		if data, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(data))) > 0 {
			r.printf("%s\n", strings.TrimRight(string(data), "\n"))
		} else {
			r.printf("  webhook RSS under load: %s unreadable (%v)\n", path, err)
		}
	} else {
		r.printf("  webhook RSS under load: BenchmarkWebhookRSS in test/chart (make bench prints it here)\n")
	}
	r.printf("\n")
	r.backfillRows()
	r.printf("\n")
}

// burstResult is a burst's outcome; rate counts the creates that
// succeeded (a quick denial is no throughput).
type burstResult struct {
	rate    float64
	errs    int
	byKind  map[string]int
	created []*corev1.Service // as the apiserver stored them
}

// burstRun makes n concurrent creates of Services asking for pool, all
// released at once.
func (r *report) burstRun(ns, prefix, pool string, n int) burstResult {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	res := burstResult{byKind: map[string]int{}}
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			s := svc(ns, fmt.Sprint(prefix, i), map[string]string{request.AnnotationPool: pool})
			err := r.kube.Create(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errs++
				res.byKind[errorKind(err)]++
				return
			}
			res.created = append(res.created, s)
		})
	}
	time.Sleep(100 * time.Millisecond) // every goroutine waits at the gate
	start := time.Now()
	close(gate)
	wg.Wait()
	res.rate = float64(n-res.errs) / time.Since(start).Seconds()
	return res
}

// warm makes five sequential creates in pool: fresh replicas list it first.
func (r *report) warm(prefix, pool string) []*corev1.Service {
	var out []*corev1.Service
	for i := range 5 {
		s := svc("opted", fmt.Sprint(prefix, i), map[string]string{request.AnnotationPool: pool})
		if err := r.kube.Create(context.Background(), s); err != nil {
			r.b.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// errorKind sorts a failed create: the apiserver gave up on the webhook, or
// the webhook's answer (its reason, without the Service's details).
func errorKind(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "failed calling webhook"):
		return "the apiserver's call to the webhook failed (" + lastPart(msg) + ")"
	case strings.Contains(msg, "denied the request: "):
		msg = msg[strings.Index(msg, "denied the request: ")+len("denied the request: "):]
		msg = strings.TrimPrefix(msg, "scw-lb-ipam: ")
		if i := strings.Index(msg, "; "); i > 0 {
			msg = msg[:i]
		}
		return "denied: " + msg
	}
	if len(msg) > 120 {
		msg = msg[:120] + "…"
	}
	return msg
}

// lastPart is the innermost cause of a wrapped error message.
func lastPart(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// duplicates counts the IPAM IDs and the addresses more than one Service of
// the opted-in namespace holds.
func duplicates(b interface{ Fatal(...any) }, kube client.Client) (ids, addrs int) {
	var list corev1.ServiceList
	if err := kube.List(context.Background(), &list, client.InNamespace("opted")); err != nil {
		b.Fatal(err)
	}
	seenID, seenAddr := sets.New[string](), sets.New[string]()
	for i := range list.Items {
		for _, id := range ccm.ReferencedIDs(&list.Items[i]) {
			if seenID.Has(id) {
				ids++
			}
			seenID.Insert(id)
		}
		for _, a := range strings.Split(list.Items[i].Annotations[request.AnnotationAddresses], ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			if seenAddr.Has(a) {
				addrs++
			}
			seenAddr.Insert(a)
		}
	}
	return ids, addrs
}
