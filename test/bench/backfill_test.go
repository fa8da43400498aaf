package bench

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// backfillBurst is the size of the bursts of backfillRows.
const backfillBurst = 200

// backfillRow is what one burst of backfillRows cost.
type backfillRow struct {
	reservations int
	res          burstResult
	// backfill are the calls about the burst's own IPs after their
	// booking (GetIP and UpdateIP: the uid back-fill), by kind; cluster
	// the listings of the whole cluster (a sweeper cycle); besides the
	// rest but the bookings (the replicas' index refresh).
	backfill       map[string]int
	cluster        int
	besides        map[string]int
	bookings, wait time.Duration
}

func (b backfillRow) perCreate() float64 {
	n := b.cluster
	for _, v := range b.backfill {
		n += v
	}
	return float64(n) / float64(max(len(b.res.created), 1))
}

// backfillRows: a burst of creates with 1,000 and then 10,000 retained
// reservations of this cluster in the pool's network. A new Service's uid
// back-fill reads and tags its own IDs, so the sweeper's calls per create
// must not grow with the reservations, where a cycle lists them all
// (⌈N/100⌉ pages).
func (r *report) backfillRows() {
	edge := r.env.PNs["edge"].ID
	var seeded []string
	var rows []backfillRow
	for _, size := range []int{1_000, 10_000} {
		// Past what the earlier rows booked in the pool (10.10.0.x–10.10.9.x).
		base := netip.MustParseAddr("10.10.16.0").As4()
		for i := len(seeded); i < size; i++ {
			v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
			v += uint32(i)
			tags := ipam.Entry{Cluster: "bench", Pool: "general", Service: types.NamespacedName{Namespace: "opted", Name: fmt.Sprint("retained-", i)},
				UID: fmt.Sprint("uid-retained-", i), OrphanedSince: time.Now().Add(-time.Minute)}.Tags()
			id, err := r.env.Emu.AddIP(edge, netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), tags, nil)
			if err != nil {
				r.b.Fatal(err)
			}
			seeded = append(seeded, id)
		}
		// Fresh replicas: their index listings and the leader's first
		// cycle read the new reservations before the burst, not in it.
		if err := r.env.RestartWebhook(nil); err != nil {
			r.b.Fatal(err)
		}
		r.firstCycle()
		r.backfilled(r.warm(fmt.Sprintf("backfill-warm-%d-", size), "general"))
		from := len(r.env.Emu.Requests())
		start := time.Now()
		res := r.burstRun("opted", fmt.Sprintf("backfill-%d-", size), "general", backfillBurst)
		booked := time.Since(start)
		r.backfilled(res.created)
		row := backfillRow{reservations: size, res: res, backfill: map[string]int{}, besides: map[string]int{}, bookings: booked, wait: time.Since(start) - booked}
		own := map[string]bool{}
		for _, s := range res.created {
			for _, id := range ccm.ReferencedIDs(s) {
				own[id] = true
			}
		}
		for _, req := range r.env.Emu.Requests()[from:] {
			k, _ := callKind(req)
			switch {
			case k == "" || req.Op == emulator.OpBookIP:
			case k == "ListIPs of the cluster":
				row.cluster++
			case own[req.IPID] && (req.Op == emulator.OpGetIP || req.Op == emulator.OpUpdateIP):
				row.backfill[k]++
			default:
				row.besides[k]++
			}
		}
		rows = append(rows, row)
	}
	r.release(seeded)

	r.printf("uid back-fill of a burst: %d concurrent creates in a pool (IPAM chooses) whose network holds this cluster's retained\n", backfillBurst)
	r.printf("reservations; calls from the burst until every new Service's uid is on its IP\n")
	r.printf("  %-13s %10s %10s %12s  %-58s %s\n", "reservations", "creates/s", "uids in", "calls/create", "the sweeper's, per create", "besides (the index refresh, every minute)")
	for _, row := range rows {
		r.printf("  %-13s %10.1f %10s %12.2f  %-58s %s\n", thousands(row.reservations), row.res.rate, (row.bookings + row.wait).Round(100*time.Millisecond),
			row.perCreate(), backfillKinds(row.backfill, row.cluster, len(row.res.created)), counted(row.besides))
	}
	lo, hi := rows[0], rows[1]
	x, y := lo.perCreate(), hi.perCreate()
	met := (y <= 1.2*x && y >= 0.8*x || y-x <= 0.1 && x-y <= 0.1) && lo.cluster+hi.cluster == 0 && lo.res.errs+hi.res.errs == 0
	r.printf("  background calls per create at 1k: %.2f (%s), at 10k: %.2f (%s)  %s\n", x, backfillKinds(lo.backfill, lo.cluster, len(lo.res.created)), y, backfillKinds(hi.backfill, hi.cluster, len(hi.res.created)),
		r.check("the uid back-fill's calls per create at 10,000 reservations within ±20% (or 0.1) of those at 1,000, no listing of the cluster per create, 0 errors", met,
			fmt.Sprintf("%.2f at 10k against %.2f at 1k, %d and %d listings of the cluster, %d errors", y, x, lo.cluster, hi.cluster, lo.res.errs+hi.res.errs)))
	r.printf("  A full cycle per create would list ⌈N/100⌉ pages of the cluster: 10 at 1k, 100 at 10k (the reservations of the earlier rows aside).\n")
}

// backfillKinds formats the back-fill's calls by kind and the cluster's
// listings, per create.
func backfillKinds(byKind map[string]int, cluster, creates int) string {
	parts := []string{}
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(byKind[k])/float64(max(creates, 1))))
	}
	return strings.Join(append(parts, fmt.Sprintf("ListIPs of the cluster %.2f", float64(cluster)/float64(max(creates, 1)))), ", ")
}

// counted formats calls by kind, as counts.
func counted(byKind map[string]int) string {
	if len(byKind) == 0 {
		return "none"
	}
	parts := []string{}
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	return strings.Join(parts, ", ")
}

// firstCycle waits until the sweeper's leader has ended its first cycle
// (restarted replicas have fresh metrics).
func (r *report) firstCycle() {
	cycled := func() bool { _, n := histogram(r.env, "scw_lb_ipam_sweeper_cycle_duration_seconds"); return n > 0 }
	if !localrun.Poll(2*time.Minute, 200*time.Millisecond, cycled) {
		r.b.Fatal("the sweeper's leader ran no cycle within 2 minutes of the restart")
	}
}

// backfilled waits until every IP of svcs carries its Service's uid.
func (r *report) backfilled(svcs []*corev1.Service) {
	want := map[string]string{}
	for _, s := range svcs {
		for _, id := range ccm.ReferencedIDs(s) {
			want[id] = string(s.UID)
		}
	}
	var missing int
	done := localrun.Poll(2*time.Minute, 100*time.Millisecond, func() bool {
		missing = 0
		for id, uid := range want {
			ip, _ := r.env.Emu.IP(id)
			if e, _ := ipam.ParseEntry(ip.Tags); e.UID != uid {
				missing++
			}
		}
		return missing == 0
	})
	if !done {
		r.b.Fatalf("%d of %d IPs without their Service's uid 2 minutes after the creates", missing, len(want))
	}
}

// release gives the seeded reservations back, so that the replicas' index
// refresh and the sweeper's cycles in the later rows list what they did
// before.
func (r *report) release(ids []string) {
	ctx := context.Background()
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: "fr-par", ClientOptions: r.env.ScalewayOptions()})
	if err != nil {
		r.b.Fatal(err)
	}
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 8 {
		wg.Go(func() {
			for id := range work {
				// One the sweeper released meanwhile (a full pool
				// brought its release forward) is gone already.
				if err := cloud.ReleaseIP(ctx, id); err != nil && scaleway.Classify(err) != scaleway.KindNotFound {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if failed != nil {
		r.b.Fatal("releasing the seeded reservations: ", failed)
	}
}
