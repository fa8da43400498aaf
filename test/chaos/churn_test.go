package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

const (
	// churnNS creates and deletes Services under names it never uses
	// again, each asking an address of pool shared and one of pool lab
	// (on another Private Network), whose share per namespace is
	// churnShare in both: a CI pipeline's preview environments. The
	// shares being equal, both fill at the same create, and that
	// Service waits for a release in each.
	churnNS    = "chaos-ci"
	churnShare = 6
	// sharedRetention is long enough that the churn meets its shares
	// before its first reservations go by themselves: an early release
	// takes the margin twice (6 s once orphaned, 6 s once brought
	// forward) plus the Load Balancer's deletion and a cycle, once per
	// pool. The settle waits for it.
	sharedRetention = 40 * time.Second
	// churnRetry is the churn's pause after a refusal client-go did not
	// retry away.
	churnRetry = 500 * time.Millisecond
	// churnDrive bounds how long the churn keeps going once the other
	// clients are done, until it has passed its share: each Service past
	// it waits for a release in both pools (two margins, a Load Balancer's
	// deletion and a cycle each), and a long run's faults may have kept
	// it below its share until then.
	churnDrive = 4 * time.Minute
)

// churnPools are the pools every Service of the churn asks, in the order
// its annotation names them.
var churnPools = []string{"shared", "lab"}

// sharedPools are small enough that the churn would fill them within
// their retention, and big enough for the share plus what the other
// clients ask of them: shared has 24 addresses on network dc, lab 12 on a
// network of its own (a Service asks at most one address per network).
var sharedPools = fmt.Sprintf(`  - {name: shared, privateNetworkID: {{dc}}, ranges: ["172.16.34.1-172.16.34.24"], retention: %s, maxPerNamespace: %d}
  - {name: lab, privateNetworkID: {{lab}}, ranges: ["172.16.40.1-172.16.40.12"], retention: %s, maxPerNamespace: %d}
`, sharedRetention, churnShare, sharedRetention, churnShare)

// poolSizes are the addresses of each of churnPools, for the report.
var poolSizes = map[string]int{"shared": 24, "lab": 12}

// churn is the churning client and what it saw.
type churn struct {
	r  *run
	mu sync.Mutex
	// created counts the churn's Services admitted, denied counts its
	// refusals by reason (the 429s are retried by client-go on its own
	// and seen only when its retries run out).
	created int
	denied  map[string]int
	// most is, per pool, the largest number of the churn namespace's
	// reservations that IPAM ever held at once (sampled) that a Service
	// was given: its uid back-filled, or a create or update returned it.
	// booked counts the others too: a booking whose admission the
	// apiserver had given up on (its answer came after the webhook
	// timeout), one over the share before its admission gave it back, or
	// one of the first pool that an admission gives back when the second
	// refuses. No Service ever holds those; the sweeper releases them
	// after the pending grace.
	most, booked map[string]int
	// over describes, per pool, IPAM's reservations of the namespace the
	// first time it held more than its share there, to tell why.
	over map[string]string
}

func newChurn(r *run) *churn {
	return &churn{r: r, denied: map[string]int{}, most: map[string]int{}, booked: map[string]int{}, over: map[string]string{}}
}

// run creates Services under new names until stop is closed, it has gone
// two past its share and one of its reservations was released early, so
// that the shares' early releases are exercised whatever the run's length
// (in a slow run the first retentions may run out first and make room by
// themselves): after stop, it keeps going for churnDrive at most. Create, then delete the one before, so one or two
// are live at a time and every deleted one's reservations are retained.
func (c *churn) run(ctx context.Context, stop <-chan struct{}) {
	var prev string
	var deadline time.Time
	for i := 0; ; i++ {
		select {
		case <-stop:
			if deadline.IsZero() {
				deadline = time.Now().Add(churnDrive)
			}
			c.mu.Lock()
			enough := c.created >= churnShare+2
			c.mu.Unlock()
			if enough {
				churned, _ := c.earlyReleases()
				enough = early(churned) > 0
			}
			if enough || time.Now().After(deadline) {
				return
			}
		default:
		}
		name := fmt.Sprintf("preview-%d", i)
		svc := fixtures.Service(churnNS, name, map[string]string{request.AnnotationPool: strings.Join(churnPools, ",")})
		start := time.Now()
		if err := c.r.kube.Create(ctx, svc); err != nil {
			reason := c.r.denied(err)
			c.mu.Lock()
			c.denied[reason]++
			c.mu.Unlock()
			// The whole answer: which pool, and what it was waiting for.
			c.r.note(churnNS+"/"+name, "create", start, nil, "denied: "+truncate(err.Error(), 400))
			// As a pipeline retries a failed job: later, not in a
			// loop that would hammer an apiserver whose webhook is down.
			time.Sleep(churnRetry)
			continue
		}
		c.r.note(churnNS+"/"+name, "create", start, svc, "ok")
		c.r.recordCreate(churnNS, name, start, svc.Annotations)
		c.r.checkReturned(svc)
		c.mu.Lock()
		c.created++
		c.mu.Unlock()
		// A preview environment lives long enough for the sweeper to see
		// it used (its uid back-filled): its reservations are then
		// retained for the pools' retention, not the short pending grace
		// of ones no Service ever showed.
		c.backfilled(svc)
		if prev != "" {
			c.r.delete(ctx, churnNS, prev)
		}
		prev = name
	}
}

// backfilled waits, 15 s at most, for the uid tag of svc's reservations.
func (c *churn) backfilled(svc *corev1.Service) {
	localrun.Poll(15*time.Second, 100*time.Millisecond, func() bool {
		for _, id := range ccm.ReferencedIDs(svc) {
			ip, ok := c.r.env.Emu.IP(id)
			if e, _ := ipam.ParseEntry(ip.Tags); !ok || e.UID == "" {
				return false
			}
		}
		return true
	})
}

// watch samples IPAM until ctx ends: the churn namespace's reservations
// in each pool, live and retained.
func (c *churn) watch(ctx context.Context) {
	for ctx.Err() == nil {
		held, booked := map[string][]string{}, map[string]int{}
		for _, ip := range c.r.env.Emu.IPs() {
			e, ok := ipam.ParseEntry(ip.Tags)
			if !ok || !e.Owns("chaos") || e.Service.Namespace != churnNS {
				continue
			}
			booked[e.Pool]++
			c.r.mu.Lock()
			_, shown := c.r.shown[ip.ID]
			c.r.mu.Unlock()
			if shown || e.UID != "" {
				held[e.Pool] = append(held[e.Pool], fmt.Sprintf("%s %s %s", ip.ID, ip.Address, e.Service.Name))
			}
		}
		for pool, ips := range held {
			c.mu.Lock()
			c.most[pool] = max(c.most[pool], len(ips))
			first := len(ips) > churnShare && c.over[pool] == ""
			c.mu.Unlock()
			if !first {
				continue
			}
			for i, h := range ips {
				ips[i] += " (" + trail(c.r.env.Emu.Audit(), strings.Fields(h)[0]) + ")"
			}
			c.mu.Lock()
			c.over[pool] = strings.Join(ips, "\n      ")
			c.mu.Unlock()
		}
		c.mu.Lock()
		for pool, n := range booked {
			c.booked[pool] = max(c.booked[pool], n)
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// earlyReleases counts, by pool, the reservations the emulator released
// with their release brought forward, as its audit shows them: the churn
// namespace's, and all. The churn's loop and its check read the same count.
func (c *churn) earlyReleases() (churned, all map[string]int) {
	churned, all = map[string]int{}, map[string]int{}
	for _, ev := range c.r.env.Emu.Audit() {
		if ev.Kind != emulator.AuditRelease {
			continue
		}
		if e, ours := ipam.ParseEntry(ev.Tags); ours && e.Early {
			all[e.Pool]++
			if e.Service.Namespace == churnNS {
				churned[e.Pool]++
			}
		}
	}
	return churned, all
}

// early is the churn namespace's early releases in all its pools.
func early(churned map[string]int) int {
	n := 0
	for _, pool := range churnPools {
		n += churned[pool]
	}
	return n
}

// check holds the churn to its shares and the others clear of its churn:
// in each pool, the churn namespace never held more than its share; it
// went past it (so the shares did make room) with at least one of its
// reservations released early; nobody was denied "exhausted".
func (c *churn) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.r.mu.Lock()
	exhausted := c.r.denials["pool exhausted"]
	c.r.mu.Unlock()
	churned, all := c.earlyReleases()
	fmt.Printf("  churn in %s (asks %s, share %d in each): %d Services admitted; refusals: %s\n",
		churnNS, strings.Join(churnPools, ","), churnShare, c.created, sortedCounts(c.denied))
	for _, pool := range churnPools {
		fmt.Printf("    pool %s (%d addresses): at most %d/%d held at once (%d booked, counting those no Service was given); released early: %d of the churn's, %d in all\n",
			pool, poolSizes[pool], c.most[pool], churnShare, c.booked[pool], churned[pool], all[pool])
		if c.most[pool] > churnShare {
			t.Errorf("namespace %s held %d addresses of pool %s, more than its share of %d; the first time:\n      %s", churnNS, c.most[pool], pool, churnShare, c.over[pool])
		}
	}
	// Past its share in every pool, through early releases somewhere: the
	// pool the churn asks first yields first, and by the time the second
	// is full its oldest may have gone with its retention, which makes
	// room as well (a long run shows it).
	if n := early(churned); c.created <= churnShare || n == 0 {
		t.Errorf("vacuous: the churn made %d Services (share %d) and %d of its reservations were released early", c.created, churnShare, n)
	}
	// The run's count has the churn's refusals too.
	if exhausted > 0 {
		t.Errorf("denied \"exhausted\": %d of the other clients' operations, %d of the churn's", exhausted-c.denied["pool exhausted"], c.denied["pool exhausted"])
	}
}
