package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

const (
	// Longer than the reuse safety margin: twice the webhook timeout (3 s).
	retention    = 8 * time.Second
	pendingGrace = 8 * time.Second
	// The webhook answers within timeoutSeconds (3) minus its margin; a
	// fault delay of 4 s is past it.
	faultDelay = 4 * time.Second
	// lbDeleteDelay is how long a deleted Load Balancer stays to_delete,
	// holding its IPs (CHAOS_LB_DELETE_DELAY overrides it; 0 deletes at
	// once). Scaleway takes tens of seconds; 6 s keeps the short run short
	// and still lets the races of a late deletion happen: longer than the
	// CCM's first retry (5 s, its service controller's), so a re-create's refused attach
	// backs off twice, and a re-create of the same name comes within it
	// (the clients' delete-then-create), so the old Load Balancer still
	// holds the address it is admitted with. Shorter than the retention
	// (8 s): the sweeper releases a deleted Service's IP once it is both
	// past its retention and detached, so the settle is no longer than
	// with an immediate deletion.
	lbDeleteDelay = 6 * time.Second
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envLBDeleteDelay is CHAOS_LB_DELETE_DELAY (a Go duration, "0" for an
// immediate deletion) as testenv.Options.LBDeleteDelay, whose zero is its
// own default and a negative value "at once".
func envLBDeleteDelay(t *testing.T) time.Duration {
	v := os.Getenv("CHAOS_LB_DELETE_DELAY")
	if v == "" {
		return lbDeleteDelay
	}
	d, err := time.ParseDuration(v)
	if v == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		t.Fatalf("CHAOS_LB_DELETE_DELAY=%q: want a duration such as 30s, or 0", v)
	}
	if d == 0 {
		return -1
	}
	return d
}

// lockedBuffer collects the webhook's logs for the secret scan.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// run is one chaos run's shared state.
type run struct {
	env      *testenv.Env
	kube     client.Client
	warnings *testenv.Warnings
	byo      []string

	done     atomic.Int64
	mu       sync.Mutex
	ops      map[string]int
	denials  map[string]int
	returned map[string]string // IPAM ID → Service that got it
	creates  []created
	// shown are the IDs a Service was seen with, and when first: the end
	// of the create or update that returned them (stickiness).
	shown map[string]time.Time
	// manifests are the annotations each Service was last created with.
	manifests map[string]map[string]string
	// uids names the Service of each UID the run saw: Load Balancers are
	// named after them.
	uids map[string]string
	// byCCM are the IPs the CCM left attached to a Load Balancer it let
	// go, its log line showing it (leftovers).
	byCCM []string
	// allowed are the writes that let a Service's address change
	// (invariant 7), by Service UID.
	allowed map[string][]allowedMove
	// journal is every operation of the run, to tell a violation's story.
	journal    []journalEntry
	violations []violation
	// staleTags says where a stale release-at was written.
	staleTags string
}

// violation is one breach of invariant n, recorded as it is seen.
type violation struct {
	n   int
	msg string
}

// journalEntry is one client operation: what, on which Service, when, and
// how it ended.
type journalEntry struct {
	svc, op    string
	start, end time.Time
	uid, ids   string
	outcome    string
}

func (r *run) count(m map[string]int, k string) {
	r.mu.Lock()
	m[k]++
	r.mu.Unlock()
}

// journalText is the journal, one operation a line, for a post-mortem.
func (r *run) journalText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.journal {
		fmt.Fprintf(&b, "%s %s %s %s uid=%s private-ip-ids=%q\n", stamp(e.start), stamp(e.end), e.svc, e.op+": "+e.outcome, e.uid, e.ids)
	}
	return b.String()
}

// violate records a breach of invariant n seen during the run; at most 50
// of each are kept.
func (r *run) violate(n int, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := 0
	for _, v := range r.violations {
		if v.n == n {
			kept++
		}
	}
	if kept < 50 {
		r.violations = append(r.violations, violation{n, fmt.Sprintf(format, args...)})
	}
}

// note records an operation in the journal.
func (r *run) note(svc, op string, start time.Time, obj *corev1.Service, outcome string) {
	e := journalEntry{svc: svc, op: op, start: start, end: time.Now(), outcome: outcome}
	if obj != nil {
		e.uid, e.ids = string(obj.UID), obj.Annotations[ccm.AnnotationPrivateIPIDs]
	}
	r.mu.Lock()
	r.journal = append(r.journal, e)
	if e.uid != "" {
		r.uids[e.uid] = svc
	}
	r.mu.Unlock()
}

func TestChaos(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	opsTotal, clients := envInt("CHAOS_OPS", 200), envInt("CHAOS_CLIENTS", 6)
	deleteDelay := envLBDeleteDelay(t)
	logs := &lockedBuffer{}
	env, err := testenv.Start(testenv.Options{
		PrivateNetworks: []string{"nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/22", "lab=172.16.40.0/22"},
		PoolFile: fmt.Sprintf(`clusterName: chaos
region: fr-par
clusterPrivateNetworkID: {{nodes}}
pools:
  - {name: dc-link, privateNetworkID: {{dc}}, ranges: ["172.16.35.1-172.16.35.250"], retention: %s}
  - {name: general, privateNetworkID: {{edge}}, default: true, retention: %s}
`+sharedPools, retention, retention),
		Namespaces:    map[string]bool{"chaos-a": true, "chaos-b": true, churnNS: true, "plain": false},
		HelmSets:      []string{"webhook.timeoutSeconds=3"},
		Args:          []string{"--sweep-interval", sweepInterval.String(), "--webhook-timeout", "3s", "--pending-grace", pendingGrace.String(), "--max-releases-per-cycle", "500", "--zap-log-level", "debug"},
		Logs:          logs,
		CCMReplicas:   ccmReplicas,
		LBDeleteDelay: deleteDelay,
		RotatableKey:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()

	r := &run{env: env, warnings: &testenv.Warnings{}, ops: map[string]int{}, denials: map[string]int{}, returned: map[string]string{},
		shown: map[string]time.Time{}, manifests: map[string]map[string]string{}, uids: map[string]string{}, allowed: map[string][]allowedMove{}}
	if r.kube, err = env.Client(r.warnings); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		id, err := env.Emu.AddIP(env.PNs["edge"].ID, netipAddr(fmt.Sprintf("10.10.3.%d", 10+i)), []string{"reserved-by-terraform"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.byo = append(r.byo, id)
	}

	f := newFaults(seed, 0.10, faultDelay)
	env.Emu.SetFaultFunc(f.inject)
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	sampleDone := make(chan struct{})
	go func() { defer close(sampleDone); r.sample(sampleCtx) }()

	kills := &replicaChaos{env: env, done: &r.done, total: opsTotal, killed: map[string]int{}}
	killCtx, stopKills := context.WithCancel(context.Background())
	var watchers sync.WaitGroup
	watchers.Go(func() { kills.run(killCtx) })
	ccmKills := &ccmChaos{env: env, done: &r.done, total: opsTotal}
	watchers.Go(func() { ccmKills.run(killCtx) })
	// The sweeper's cycles, counted over the kills: the leader must not
	// loop, whoever it is.
	sweeps := newCycles(env)
	watchers.Go(func() { sweeps.run(killCtx) })
	rotation := &keyRotation{env: env, done: &r.done, total: opsTotal}
	watchers.Go(func() { rotation.run(killCtx) })

	// One more client churns Service names in a namespace of its own,
	// held to its share of pools shared and lab.
	ch := newChurn(r)
	watchCtx, stopWatching := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); ch.watch(watchCtx) }()
	stopChurn, churnDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(churnDone); ch.run(context.Background(), stopChurn) }()

	start := time.Now()
	var wg sync.WaitGroup
	per := (opsTotal + clients - 1) / clients
	for c := range clients {
		wg.Go(func() { r.client(seed, c, per) })
	}
	wg.Wait()
	// A ledger fault once the clients are done, while the churn goes on:
	// a stale release-at on reservations they just left.
	stale := make(chan string, 1)
	go func() { stale <- r.staleReleaseAt(3) }()
	close(stopChurn)
	<-churnDone
	opsWall := time.Since(start)

	// Quiesce: no more faults, let the sweeper and the CCM settle.
	f.on.Store(false)
	settle := time.Now()
	// A leader killed near the end is replaced only once its lease has
	// expired: the sweeper's settling (debounce, retention, a cycle)
	// counts from a replica leading again.
	led := localrun.Poll(30*time.Second, 250*time.Millisecond, func() bool { return slices.ContainsFunc(env.Replicas, (*testenv.Replica).Leading) })
	if !led {
		t.Error("no replica leads the sweeper 30s after the operations ended")
	}
	// An IP is released once past its retention and detached: a Load
	// Balancer deleted at the end holds its IP for deleteDelay.
	ok3 := led && localrun.Poll(30*time.Second+sharedRetention+max(deleteDelay, 0), 250*time.Millisecond, func() bool { return len(r.leftovers().unexplained) == 0 })
	stopSampling()
	<-sampleDone
	stopWatching()
	<-watchDone
	stopKills()
	watchers.Wait()

	kills.check(t)
	ccmKills.check(t)
	rotation.check(t, r)
	if path := os.Getenv("CHAOS_DEBUG"); path != "" {
		_ = os.WriteFile(path, []byte(logs.String()), 0o600)
		_ = os.WriteFile(path+".journal", []byte(r.journalText()), 0o600)
	}
	settled := time.Since(settle)
	r.staleTags = <-stale
	addrs, sticky := r.liveAddresses(), r.stickiness()
	results := r.invariants(ok3, logs.String(), addrs, sticky)
	r.summary(seed, opsTotal, clients, max(deleteDelay, 0), opsWall, settled, f, results, addrs, sticky, kills, sweeps)
	fmt.Print(ccmKills.summary())
	fmt.Print(rotation.summary())
	ch.check(t)
	sweeps.check(t)
	for _, res := range results {
		if !res.ok {
			t.Errorf("invariant %d broken: %s", res.n, res.detail)
		}
	}
	if t.Failed() {
		keepLogs(t, seed, logs.String(), r.journalText())
	}
}

// keepLogs writes the replicas' and the CCM's logs and the journal of a
// failed run where they outlive it: CHAOS_LOGS_DIR (make chaos sets
// bin/chaos-logs), not the run's TMPDIR, which make removes on exit.
func keepLogs(t *testing.T, seed uint64, logs, journal string) {
	dir := os.Getenv("CHAOS_LOGS_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping the logs: %v", err)
		return
	}
	base := filepath.Join(dir, fmt.Sprintf("chaos-%d-%s", seed, time.Now().UTC().Format("20060102T150405")))
	for suffix, text := range map[string]string{".log": logs, ".journal": journal} {
		if err := os.WriteFile(base+suffix, []byte(text), 0o644); err != nil {
			t.Logf("keeping the logs: %v", err)
			return
		}
	}
	t.Logf("the replicas' and the CCM's logs: %s.log; the journal: %s.journal", base, base)
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// client runs n seeded operations.
func (r *run) client(seed uint64, c, n int) {
	rng := rand.New(rand.NewPCG(seed, uint64(c)+1))
	ns := []string{"chaos-a", "chaos-b"}[c%2]
	ctx := context.Background()
	for range n {
		name := fmt.Sprintf("c%d-svc-%d", c, rng.IntN(6))
		switch x := rng.IntN(100); {
		case x < 24:
			r.create(ctx, ns, name, r.request(rng))
		case x < 30:
			r.reapply(ctx, ns, name, rng.IntN(2) == 0)
		case x < 50:
			r.delete(ctx, ns, name)
		case x < 62:
			r.delete(ctx, ns, name)
			r.create(ctx, ns, name, r.request(rng))
		case x < 80:
			r.changePool(ctx, ns, name, rng.IntN(2) == 0)
		case x < 88:
			r.create(ctx, ns, name, map[string]string{request.AnnotationIPAMIDs: r.byo[rng.IntN(len(r.byo))]})
		default:
			// Opted-out and excluded namespaces, every annotation set.
			target := []string{"plain", "kube-system"}[rng.IntN(2)]
			r.create(ctx, target, name, map[string]string{request.AnnotationPool: "dc-link", request.AnnotationAddress: "172.16.35.7",
				request.AnnotationIPAMIDs: r.byo[0], request.AnnotationAllowIPChange: "true"})
			r.delete(ctx, target, name)
		}
	}
}

func (r *run) request(rng *rand.Rand) map[string]string {
	switch rng.IntN(7) {
	case 6:
		// The churn's pools: the others must never be denied for its
		// retained reservations.
		return map[string]string{request.AnnotationPool: churnPools[rng.IntN(len(churnPools))]}
	case 0:
		return map[string]string{request.AnnotationPool: "dc-link"}
	case 5:
		// The CCM's own pn-ids in the manifest: the webhook adds the pool's
		// network, and every re-apply resets it to the nodes' alone.
		return map[string]string{request.AnnotationPool: "dc-link", ccm.AnnotationPNIDs: r.env.PNs["nodes"].ID}
	case 1:
		return map[string]string{request.AnnotationPool: "dc-link,general"}
	case 2:
		return map[string]string{request.AnnotationAddress: fmt.Sprintf("172.16.35.%d", 1+rng.IntN(250))}
	case 3:
		return nil // the default pool
	}
	return map[string]string{request.AnnotationPool: "general"}
}

func (r *run) create(ctx context.Context, ns, name string, ann map[string]string) {
	r.count(r.ops, "create")
	r.done.Add(1)
	manifest := maps.Clone(ann)
	svc := fixtures.Service(ns, name, ann)
	start := time.Now()
	if err := r.kube.Create(ctx, svc); err != nil {
		r.note(ns+"/"+name, "create", start, nil, r.denied(err))
		return
	}
	r.note(ns+"/"+name, "create", start, svc, "ok")
	r.mu.Lock()
	r.manifests[ns+"/"+name] = manifest
	r.mu.Unlock()
	r.recordCreate(ns, name, start, svc.Annotations)
	r.checkReturned(svc)
	if svc.Annotations[request.AnnotationAllowIPChange] == "true" {
		r.allow(svc, start, nil)
	}
}

func (r *run) delete(ctx context.Context, ns, name string) {
	r.count(r.ops, "delete")
	r.done.Add(1)
	start := time.Now()
	err := r.kube.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	switch {
	case err == nil:
		r.note(ns+"/"+name, "delete", start, nil, "ok")
	case apierrors.IsNotFound(err):
		r.note(ns+"/"+name, "delete", start, nil, "not found")
	default:
		r.note(ns+"/"+name, "delete", start, nil, r.denied(err))
	}
}

func (r *run) changePool(ctx context.Context, ns, name string, allow bool) {
	key := "pool-change"
	if allow {
		key += "+allow"
	}
	r.count(r.ops, key)
	r.done.Add(1)
	svc := &corev1.Service{}
	if err := r.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	delete(svc.Annotations, request.AnnotationIPAMIDs)
	delete(svc.Annotations, request.AnnotationAddress)
	if svc.Annotations[request.AnnotationPool] == "general" {
		svc.Annotations[request.AnnotationPool] = "dc-link"
	} else {
		svc.Annotations[request.AnnotationPool] = "general"
	}
	if allow {
		svc.Annotations[request.AnnotationAllowIPChange] = "true"
	} else {
		delete(svc.Annotations, request.AnnotationAllowIPChange)
	}
	start := time.Now()
	if err := r.kube.Update(ctx, svc); err != nil {
		r.note(ns+"/"+name, key, start, svc, r.denied(err))
		if allow && !isAPIStatus(err) {
			// No answer from the apiserver: the update may have been
			// made. Any move of this Service's address is put down to it.
			r.allow(svc, start, err)
		}
		return
	}
	r.note(ns+"/"+name, key, start, svc, "ok")
	r.checkReturned(svc)
	if allow {
		r.allow(svc, start, nil)
	}
}

// reapply applies the manifest the Service was created from again, as
// GitOps tools do on every sync and people do by habit: the webhook must
// keep it a no-op for the Load Balancer (same IDs, the pool's network still
// in pn-ids), or deny it when it asks for another address (a pool changed
// since) without allow-ip-change.
func (r *run) reapply(ctx context.Context, ns, name string, replace bool) {
	key := "re-apply"
	if replace {
		key = "replace"
	}
	r.count(r.ops, key)
	r.done.Add(1)
	r.mu.Lock()
	manifest, ok := r.manifests[ns+"/"+name]
	r.mu.Unlock()
	svc := &corev1.Service{}
	if !ok || r.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc) != nil {
		return
	}
	if replace {
		// kubectl replace, Argo CD's Replace=true: the annotations as
		// the manifest has them; what the webhook and the CCM wrote is
		// gone.
		svc.Annotations = maps.Clone(manifest)
	} else {
		// kubectl apply (its three-way patch), server-side apply (Helm 4,
		// Argo CD, Flux): what the manifest declares is reset to its
		// values, the rest is kept.
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		maps.Copy(svc.Annotations, manifest)
	}
	start := time.Now()
	if err := r.kube.Update(ctx, svc); err != nil {
		r.note(ns+"/"+name, key, start, svc, r.denied(err))
		if svc.Annotations[request.AnnotationAllowIPChange] == "true" && !isAPIStatus(err) {
			r.allow(svc, start, err)
		}
		return
	}
	r.note(ns+"/"+name, key, start, svc, "ok")
	r.checkReturned(svc)
	// A pool changed with allow-ip-change keeps it: applying the manifest
	// then moves the Service back, as asked.
	if svc.Annotations[request.AnnotationAllowIPChange] == "true" {
		r.allow(svc, start, nil)
	}
}

func isAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// checkReturned records what the webhook handed out (invariant 4), and
// checks opted-out namespaces were left alone (invariant 5).
func (r *run) checkReturned(svc *corev1.Service) {
	if svc.Namespace == "plain" || svc.Namespace == "kube-system" {
		for _, k := range []string{ccm.AnnotationPrivateIPIDs, ccm.AnnotationPNIDs, request.AnnotationAddresses} {
			if _, written := svc.Annotations[k]; written && k != ccm.AnnotationPrivateIPIDs {
				r.violate(5, "%s/%s got %s", svc.Namespace, svc.Name, k)
			}
		}
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ccm.ReferencedIDs(svc) {
		r.returned[id] = svc.Namespace + "/" + svc.Name
		if _, ok := r.shown[id]; !ok {
			r.shown[id] = now
		}
	}
}

// denied classifies an apiserver error by its reason, counts it and
// returns the reason.
func (r *run) denied(err error) string {
	msg := err.Error()
	reason := "other: " + truncate(msg, 200)
	for _, k := range []struct{ match, reason string }{
		{"still held by the Load Balancer of the previous", "address still held by the previous Load Balancer (retried)"},
		{"being claimed", "bring-your-own claim taken at the same moment"},
		{"cannot be read from the cache", "cache unavailable"},
		{"cannot tell which Services", "cache unavailable"},
		{"does not exist in region", "IPAM ID does not exist"},
		{"failed calling webhook", "webhook timeout or unreachable"},
		{"unavailable after retries", "Scaleway unavailable"},
		{"refused the credentials", keyRefusedReason},
		{"is exhausted", "pool exhausted"},
		{"is held by", "address held"},
		// A re-apply of a manifest pinning an address of the pool the
		// Service has since left with allow-ip-change.
		{"is outside pool", "address outside the Service's pool"},
		// A re-apply of a bring-your-own manifest over a pool set since.
		{"cannot be combined with", "annotations that cannot be combined"},
		{"allow-ip-change", "IP change without allow-ip-change"},
		{"already used by Service", "IPAM ID used by another Service"},
		{"is attached to", "IPAM ID attached"},
		{"reserved for Service", "IPAM ID reserved for another Service"},
		{"already exists", "Service already exists"},
		{"the object has been modified", "update conflict"},
		{"heavy contention", "pool contention"},
		{"is full;", "pool full: a retained reservation is released early (retried)"},
		{"reached its", "namespace share taken at the same moment (retried)"},
		{"all used by its live Services", "namespace share used by live Services"},
		{"addresses of pool", "namespace share full: a retained reservation is released early (retried)"},
	} {
		if strings.Contains(msg, k.match) {
			reason = k.reason
			break
		}
	}
	r.count(r.denials, reason)
	return reason
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// sample checks invariants 1 and 2 while the run goes on: no IPAM ID
// referenced by two live Services, and every IP a live Service references
// exists. The Scaleway CCM attaches and detaches meanwhile,
// through the emulator's Load Balancer API.
func (r *run) sample(ctx context.Context) {
	for ctx.Err() == nil {
		var list corev1.ServiceList
		if err := r.env.Kube.List(ctx, &list); err == nil {
			refs := map[string][]string{}
			now := time.Now()
			r.mu.Lock()
			for i := range list.Items {
				svc := &list.Items[i]
				r.uids[string(svc.UID)] = svc.Namespace + "/" + svc.Name
				// Also the IDs of Services whose client saw an error
				// although the write was made (stickiness).
				for _, id := range ccm.ReferencedIDs(svc) {
					if _, ok := r.shown[id]; !ok && svc.Namespace != "plain" && svc.Namespace != "kube-system" {
						r.shown[id] = now
					}
				}
			}
			r.mu.Unlock()
			for i := range list.Items {
				svc := &list.Items[i]
				if !ccm.Live(svc) || svc.Namespace == "plain" || svc.Namespace == "kube-system" {
					continue
				}
				for _, id := range ccm.ReferencedIDs(svc) {
					refs[id] = append(refs[id], svc.Namespace+"/"+svc.Name)
					if _, ok := r.env.Emu.IP(id); ok {
						continue
					}
					// Re-check: the Service may have been deleted meanwhile.
					cur := &corev1.Service{}
					if err := r.env.Kube.Get(ctx, client.ObjectKeyFromObject(svc), cur); err == nil && cur.UID == svc.UID && ccm.Live(cur) {
						r.violate(2, "IP %s of live Service %s/%s does not exist", id, svc.Namespace, svc.Name)
					}
				}
			}
			for id, svcs := range refs {
				if len(svcs) > 1 {
					r.violate(1, "IPAM ID %s referenced by %v", id, svcs)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *run) summary(seed uint64, ops, clients int, deleteDelay, opsWall, settle time.Duration, f *faults, res []result, addrs *liveAddresses, sticky *stickiness, kills *replicaChaos, sweeps *cycles) {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d (CHAOS_SEED=%d replays the operations; fault timing follows goroutine order), %d clients\n", seed, seed, clients)
	fmt.Fprintf(&b, "  Load Balancers deleted %s after DeleteLB (CHAOS_LB_DELETE_DELAY), by the real Scaleway CCM (two replicas, leader election)\n", deleteDelay)
	r.mu.Lock()
	done := 0
	for _, n := range r.ops {
		done += n
	}
	made := map[string]int{}
	for _, e := range r.journal {
		if e.outcome == "ok" {
			made[e.op]++
		}
	}
	fmt.Fprintf(&b, "  operations: %d in %s (%s; made: %s)\n", done, opsWall.Round(time.Millisecond), sortedCounts(r.ops), sortedCounts(made))
	fmt.Fprintf(&b, "  denials and errors by reason:\n")
	for _, line := range strings.Split(sortedCounts(r.denials), ", ") {
		if line != "" {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	r.mu.Unlock()
	fmt.Fprintf(&b, "  faults injected: %d (", f.total())
	kinds := make([]string, 0, len(f.counts))
	for k, c := range f.counts {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, c.Load()))
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "%s) over %d Scaleway calls\n", strings.Join(kinds, " "), len(r.env.Emu.Requests()))
	fmt.Fprintf(&b, "  stale release-at written behind the replicas' back: %s\n", r.staleTags)
	fmt.Fprintf(&b, "  settled after the faults stopped in %s\n", settle.Round(time.Millisecond))
	b.WriteString(sticky.summary())
	b.WriteString(addrs.summary())
	b.WriteString(kills.summary())
	b.WriteString(sweeps.summary())
	r.mu.Lock()
	fmt.Fprintf(&b, "  IPs the CCM left attached to a Load Balancer it let go, as its own log shows (not a violation): %d\n", len(r.byCCM))
	for _, l := range r.byCCM {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	r.mu.Unlock()
	names := []string{"", "no IPAM ID referenced by two live Services", "no referenced IP ever released",
		"after quiescence + retention, nothing of ours unreferenced", "every ID handed out was booked or validated",
		"opted-out and excluded namespaces never modified", "the secret key in no log, event, warning or metric",
		"no live Load Balancer changed address without allow-ip-change",
		"re-creates within retention got their previous address back"}
	for _, x := range res {
		status := "PASS"
		if !x.ok {
			status = "FAIL " + truncate(x.detail, 300)
		}
		fmt.Fprintf(&b, "  invariant %d (%s): %s\n", x.n, names[x.n], status)
	}
	fmt.Print(b.String())
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
