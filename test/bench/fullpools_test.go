package bench

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// tagNamespace is the ledger's namespace tag (DESIGN.md, The ledger): a
// share counts one namespace's reservations with a listing by it.
const tagNamespace = "scw-lb-ipam/namespace="

const (
	// yieldRetention is the retention of the pools of fullPoolRows: their
	// seeded reservations are released weeks from now, far more than the
	// margin away, so that each of them may yield.
	yieldRetention = 30 * 24 * time.Hour
	// fullPoolSize is the addresses of a full pool's ranges, every one
	// held by a retained reservation.
	fullPoolSize = 64
	// shareOthers is the reservations of other namespaces on the share's
	// network.
	shareOthers = 10_000
	// shareMax is the share's maxPerNamespace: room for the row's creates,
	// so that each books.
	shareMax = 8
	// callBound is DESIGN.md's bound on a CREATE's calls on these paths,
	// whatever the number of reservations on the network.
	callBound = 4
	// unsureOthers is the other tenants' IPs (VMs, databases, another
	// cluster's reservations) on the subnet of the pool whose view is
	// unsure; unsureHolders the live Services of its pool deleted one
	// before each of the row's creates.
	unsureOthers  = 300
	unsureHolders = 4
)

// The first addresses of the full pools' ranges.
const (
	fullAttachedFrom = "10.30.0.10"
	fullFreeFrom     = "10.31.0.10"
	fullUnsureFrom   = "10.32.1.10"
	// unsureOthersFrom is the first of the other tenants' IPs beside the
	// unsure pool's range, on the same subnet.
	unsureOthersFrom = "10.32.2.2"
)

// yieldNetworks and yieldPools are the Private Networks and pools of
// fullPoolRows, in startReport's environment: a network of their own
// each, named as the pool, so that the other rows' pools never see their
// reservations.
func yieldNetworks() []string {
	return []string{"full-attached=10.30.0.0/24", "full-free=10.31.0.0/24", "full-unsure=10.32.0.0/22", "shared=10.40.0.0/16"}
}

func yieldPools() string {
	ranges := func(base string) string {
		first := netip.MustParseAddr(base)
		last := first
		for range fullPoolSize - 1 {
			last = last.Next()
		}
		return fmt.Sprintf(`["%s-%s"]`, first, last)
	}
	retention := fmt.Sprintf("%dd", yieldRetention/(24*time.Hour))
	return fmt.Sprintf(`  - {name: full-attached, privateNetworkID: {{full-attached}}, ranges: %s, retention: %s}
  - {name: full-free, privateNetworkID: {{full-free}}, ranges: %s, retention: %s}
  - {name: full-unsure, privateNetworkID: {{full-unsure}}, ranges: %s, retention: %s}
  - {name: shared, privateNetworkID: {{shared}}, maxPerNamespace: %d, retention: %s}
`, ranges(fullAttachedFrom), retention, ranges(fullFreeFrom), retention, ranges(fullUnsureFrom), retention, shareMax, retention)
}

// yieldRow is one row of fullPoolRows: the pool its creates ask for, what
// it wants of the answer, and which listings the goal allows.
type yieldRow struct {
	name, what string
	pool       string
	// books: the create is admitted; otherwise the answer is the retryable
	// refusal (429) of a full pool.
	books bool
	// allowed reports whether a listing's query is one the goal allows;
	// goal words them in the table.
	allowed func(q url.Values) bool
	goal    string
	// before runs ahead of the row's i-th create, outside its count.
	before func(i int)
}

// yieldRun is what one create of a yieldRow cost.
type yieldRun struct {
	calls  int
	detail string // by operation
	// listings are the ListIPs calls by filter, described; stray counts
	// those the goal does not allow.
	listings map[string]int
	stray    int
	answer   string
}

// fullPoolRows: calls per CREATE in a pool every address of which holds a
// retained reservation of this cluster, all of them attached (to Load
// Balancers being deleted: none may yield) or none (each may), and in a
// pool with a share while its network holds 10,000 reservations of other
// namespaces. DESIGN.md bounds each to 4 calls: a full pool lists its own
// subnet at most, and a share lists the namespace's own reservations, by
// its tag, whatever the network holds. The reservations are seeded for
// these rows and released after them.
func (r *report) fullPoolRows() {
	start := time.Now()
	seeded, attached := r.seedYield()
	seeding := time.Since(start)
	// Fresh replicas: their pools' listings and the leader's first cycle
	// read the seeded reservations before the rows, not in them.
	if err := r.env.RestartWebhook(nil); err != nil {
		r.b.Fatal(err)
	}
	r.firstCycle()

	kube, err := kubernetes.NewForConfig(r.env.Config)
	if err != nil {
		r.b.Fatal(err)
	}
	const runs = 3
	var notes []string
	for _, row := range r.yieldRows() {
		var got []yieldRun
		for i := range runs + 1 {
			if row.before != nil {
				row.before(i)
			}
			// Let the listings an admission starts in the background end.
			time.Sleep(300 * time.Millisecond)
			if run := r.yieldCreate(kube, row, i); i > 0 { // the first is the warm-up
				got = append(got, run)
			}
		}
		slices.SortFunc(got, func(a, b yieldRun) int { return a.calls - b.calls })
		med := got[len(got)/2]
		listings := "none"
		if len(med.listings) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(med.listings)) {
				parts = append(parts, fmt.Sprintf("%d × %s", med.listings[k], k))
			}
			listings = strings.Join(parts, "; ")
		}
		mk := r.check(fmt.Sprintf("%s: at most %d calls, listings of the %s only", row.what, callBound, row.goal), med.calls <= callBound && med.stray == 0,
			fmt.Sprintf("%d calls (%s), answer %s; listings: %s; %d outside the %s", med.calls, med.detail, med.answer, listings, med.stray, row.goal))
		r.printf("  %-38s %5d  %-36s ≤ %d, listings of the %s only  %s\n", row.name, med.calls, med.detail, callBound, row.goal, mk)
		notes = append(notes, fmt.Sprintf("    %s: answer %s; ListIPs: %s", row.name, med.answer, listings))
	}
	for _, n := range notes {
		r.printf("%s\n", n)
	}
	r.printf("  Full pools: %d ranged addresses, each held by a reservation retained for a deleted Service (orphaned a day ago, its\n", fullPoolSize)
	r.printf("  release-at %d days after); the share's network holds %s such reservations of a hundred other namespaces, seeded in\n",
		yieldRetention/(24*time.Hour), thousands(shareOthers))
	r.printf("  %s in the emulator's model. One admission per create: client-go's own retries of the 429 are off.\n", seeding.Round(time.Millisecond))

	for _, id := range attached {
		if err := r.env.Emu.Detach(id); err != nil {
			r.b.Fatal(err)
		}
	}
	r.release(seeded)
}

// seedYield books the reservations of fullPoolRows, retained for deleted
// Services: every address of the full pools (those of full-attached
// attached to Load Balancers being deleted), and shareOthers of other
// namespaces on the share's network.
func (r *report) seedYield() (seeded, attached []string) {
	// Orphaned a day ago, well past the margin.
	since := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	seed := func(pool, first string, n int, svc func(i int) types.NamespacedName, lb bool) {
		addr := netip.MustParseAddr(first)
		for i := range n {
			var res *emulator.Resource
			if lb {
				res = &emulator.Resource{Type: "lb_server", Name: fmt.Sprint("deleted-lb-", i)}
			}
			s := svc(i)
			id, err := r.env.Emu.AddIP(r.env.PNs[pool].ID, addr, retainedTags(pool, s, "uid-"+s.Namespace+"-"+s.Name, since), res)
			if err != nil {
				r.b.Fatal(err)
			}
			seeded = append(seeded, id)
			if lb {
				attached = append(attached, id)
			}
			addr = addr.Next()
		}
	}
	gone := func(prefix string) func(int) types.NamespacedName {
		return func(i int) types.NamespacedName {
			return types.NamespacedName{Namespace: "gone", Name: fmt.Sprint(prefix, i)}
		}
	}
	seed("full-attached", fullAttachedFrom, fullPoolSize, gone("attached-"), true)
	seed("full-free", fullFreeFrom, fullPoolSize, gone("free-"), false)
	seeded = append(seeded, r.seedUnsure(since, seed, gone("unsure-"))...)
	// AddIP books in the emulator's model, without HTTP: the 10,000 take
	// well under a second where BookIP calls would take many. A hundred
	// namespaces of a hundred each, past the addresses the share's own
	// bookings get (IPAM chooses from the lowest).
	seed("shared", "10.40.1.0", shareOthers, func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: fmt.Sprintf("tenant-%02d", i%100), Name: fmt.Sprint("svc-", i)}
	}, false)
	return seeded, attached
}

// seedUnsure fills pool full-unsure: retained reservations (seed) and,
// on its last addresses, those of unsureHolders live Services of the
// unlabelled namespace plain (the webhook never sees them; the Service
// caches do), which the row deletes one before each create: the view then
// holds a reservation orphaned and not yet marked. unsureOthers IPs of
// other tenants share the subnet. It returns the IDs it booked beside
// seed's.
func (r *report) seedUnsure(since time.Time, seed func(string, string, int, func(int) types.NamespacedName, bool), gone func(int) types.NamespacedName) []string {
	seed("full-unsure", fullUnsureFrom, fullPoolSize-unsureHolders, gone, false)
	var ids []string
	addr := netip.MustParseAddr(fullUnsureFrom)
	for range fullPoolSize - unsureHolders {
		addr = addr.Next()
	}
	pn := r.env.PNs["full-unsure"].ID
	for i := range unsureHolders {
		holder := types.NamespacedName{Namespace: "plain", Name: fmt.Sprint("holder-", i)}
		e := ipam.Entry{Cluster: "bench", Pool: "full-unsure", Service: holder}
		id, err := r.env.Emu.AddIP(pn, addr, append(e.Tags(), tagNamespace+holder.Namespace), nil)
		if err != nil {
			r.b.Fatal(err)
		}
		ids = append(ids, id)
		s := svc(holder.Namespace, holder.Name, map[string]string{ccm.AnnotationPrivateIPIDs: id, request.AnnotationAddresses: addr.String()})
		if err := r.kube.Create(context.Background(), s); err != nil {
			r.b.Fatal(err)
		}
		addr = addr.Next()
	}
	addr = netip.MustParseAddr(unsureOthersFrom)
	for i := range unsureOthers {
		var tags []string // a VM's, a database's
		if i%3 == 0 {
			tags = ipam.Entry{Cluster: "another", Pool: "full-unsure", Service: types.NamespacedName{Namespace: "x", Name: fmt.Sprint("o-", i)}}.Tags()
		}
		id, err := r.env.Emu.AddIP(pn, addr, tags, nil)
		if err != nil {
			r.b.Fatal(err)
		}
		ids = append(ids, id)
		addr = addr.Next()
	}
	return ids
}

// deleteHolder deletes the i-th Service of seedUnsure. The replicas'
// Service caches learn of it within milliseconds: the row's pause before
// each create covers them.
func (r *report) deleteHolder(i int) {
	s := svc("plain", fmt.Sprint("holder-", i), nil)
	if err := r.kube.Delete(context.Background(), s); err != nil {
		r.b.Fatal(err)
	}
}

// yieldRows are the rows of fullPoolRows and their goals.
func (r *report) yieldRows() []yieldRow {
	ownSubnet := func(network string) func(url.Values) bool {
		pn := r.env.PNs[network]
		return func(q url.Values) bool {
			return q.Get("private_network_id") == pn.ID || q.Get("subnet_id") == pn.Subnets[0].ID
		}
	}
	nsTag := tagNamespace + "opted"
	return []yieldRow{
		{name: fmt.Sprintf("full pool, %d retained (all attached)", fullPoolSize), pool: "full-attached", allowed: ownSubnet("full-attached"), goal: "pool's subnet",
			what: fmt.Sprintf("calls per CREATE in a full pool with %d retained reservations (all attached)", fullPoolSize)},
		{name: fmt.Sprintf("full pool, %d retained (none attached)", fullPoolSize), pool: "full-free", allowed: ownSubnet("full-free"), goal: "pool's subnet",
			what: fmt.Sprintf("calls per CREATE in a full pool with %d retained reservations (none attached)", fullPoolSize)},
		{name: fmt.Sprintf("full pool, 1 not yet marked, %d others", unsureOthers), pool: "full-unsure", allowed: ownSubnet("full-unsure"), goal: "pool's subnet",
			before: r.deleteHolder,
			what:   fmt.Sprintf("calls per CREATE in a full pool, one reservation orphaned and not yet marked, %d other IPs on the subnet", unsureOthers)},
		{name: fmt.Sprintf("share, %s of other namespaces", thousands(shareOthers)), pool: "shared", books: true, goal: "namespace tag",
			allowed: func(q url.Values) bool {
				// ListIPs' tag filter matches any tag: one more tag
				// (the cluster's) would list the whole cluster.
				return len(q["tags"]) > 0 && !slices.ContainsFunc(q["tags"], func(t string) bool { return t != nsTag })
			},
			what: fmt.Sprintf("calls per CREATE in a pool with a share (maxPerNamespace) while the network holds %s reservations of other namespaces", thousands(shareOthers))},
	}
}

// yieldCreate makes the i-th create of row, once, and counts the
// emulator's calls while it ran from the emulator's log, each listing's
// filter checked against the row's goal.
func (r *report) yieldCreate(kube kubernetes.Interface, row yieldRow, i int) yieldRun {
	s := svc("opted", fmt.Sprint("calls-", row.pool, "-", i), map[string]string{request.AnnotationPool: row.pool})
	from := time.Now()
	// Once: client-go retries a 429 on its own, after its Retry-After, and
	// a full pool answers one; a row counts one admission's calls.
	err := kube.CoreV1().RESTClient().Post().Namespace(s.Namespace).Resource("services").Body(s).MaxRetries(0).Do(context.Background()).Error()
	to := time.Now()
	run := yieldRun{listings: map[string]int{}}
	switch {
	case row.books && err == nil:
		run.answer = "admitted"
	case !row.books && apierrors.IsTooManyRequests(err):
		run.answer = "429"
	case err == nil:
		r.b.Fatalf("%s: %s was admitted: the pool was not full", row.name, s.Name)
	default:
		r.b.Fatalf("%s: %v", row.name, err)
	}
	names := map[string]string{}
	for name, pn := range r.env.PNs {
		names[pn.ID] = name
	}
	counts := map[string]int{}
	for _, req := range r.env.Emu.Requests() {
		if req.Time.Before(from) || req.Time.After(to) || req.Op == "" || req.Op == emulator.OpMetadata {
			continue
		}
		run.calls++
		counts[string(req.Op)]++
		if req.Op != emulator.OpListIPs {
			continue
		}
		q := url.Values{}
		if u, err := url.Parse(req.Path); err == nil {
			q = u.Query()
		}
		run.listings[describeListing(q, names)]++
		if !row.allowed(q) {
			run.stray++
		}
	}
	var ops []string
	for _, op := range slices.Sorted(maps.Keys(counts)) {
		ops = append(ops, fmt.Sprintf("%s=%d", op, counts[op]))
	}
	run.detail = strings.Join(ops, " ")
	return run
}

// retainedTags is the ledger of a reservation this cluster retains for
// the deleted Service svc of pool: orphaned since since, released when the
// pool's retention ends.
func retainedTags(pool string, svc types.NamespacedName, uid string, since time.Time) []string {
	e := ipam.Entry{Cluster: "bench", Pool: pool, Service: svc, UID: uid, OrphanedSince: since, ReleaseAt: since.Add(yieldRetention)}
	tags := e.Tags()
	// Every reservation carries its namespace's tag (the sweeper
	// back-fills it on older ones): written here when Tags does not.
	if ns := tagNamespace + svc.Namespace; !slices.Contains(tags, ns) {
		tags = append(tags, ns)
	}
	return tags
}

// describeListing words a ListIPs query: where it lists (a Private
// Network, by name when it is one of the environment's, or a subnet) and
// by which tags.
func describeListing(q url.Values, names map[string]string) string {
	where := "every network"
	switch pn, subnet := q.Get("private_network_id"), q.Get("subnet_id"); {
	case pn != "" && names[pn] != "":
		where = "network " + names[pn]
	case pn != "":
		where = "network " + pn
	case subnet != "":
		where = "subnet " + subnet
	}
	if tags := q["tags"]; len(tags) > 0 {
		return where + " by " + strings.Join(tags, ",")
	}
	return where
}
