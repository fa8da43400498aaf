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
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

const (
	// churnNS creates and deletes Services under names it never uses
	// again, in pool shared, whose share per namespace is churnShare: a
	// CI pipeline's preview environments.
	churnNS    = "chaos-ci"
	churnShare = 6
	// sharedRetention is long enough that the churn meets its share before
	// its first reservations go by themselves: an early release takes the
	// margin twice (6 s once orphaned, 6 s once brought forward) plus the
	// Load Balancer's deletion and a cycle. The settle waits for it.
	sharedRetention = 40 * time.Second
)

// sharedPool is small enough that the churn would fill it within its
// retention, and big enough for the share plus what the other clients
// ask of it.
var sharedPool = fmt.Sprintf(`  - {name: shared, privateNetworkID: {{dc}}, ranges: ["172.16.34.1-172.16.34.24"], retention: %s, maxPerNamespace: %d}
`, sharedRetention, churnShare)

// churn is the churning client and what it saw.
type churn struct {
	r  *run
	mu sync.Mutex
	// created counts the churn's Services admitted, denied counts its
	// refusals by reason (the 429s are retried by client-go on its own
	// and seen only when its retries run out).
	created int
	denied  map[string]int
	// most is the largest number of the churn namespace's reservations
	// in pool shared that IPAM ever held at once (sampled) that a Service
	// was given: its uid back-filled, or a create or update returned it.
	// booked counts the others too: a booking whose admission the
	// apiserver had given up on (its answer came after the webhook
	// timeout), or one over the share before its admission gave it back.
	// No Service ever holds those; the sweeper releases them after the
	// pending grace.
	most, booked int
	// over describes IPAM's reservations of the namespace the first time
	// it held more than its share, to tell why.
	over string
}

// run creates Services under new names until stop is closed and it has
// gone two past its share (a short run's other clients may end first),
// or for two minutes at most: create, then delete the one before, so one
// or two are live at a time and every deleted one's reservation is
// retained.
func (c *churn) run(ctx context.Context, stop <-chan struct{}) {
	var prev string
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		select {
		case <-stop:
			c.mu.Lock()
			enough := c.created >= churnShare+2
			c.mu.Unlock()
			if enough || time.Now().After(deadline) {
				return
			}
		default:
		}
		name := fmt.Sprintf("preview-%d", i)
		svc := fixtures.Service(churnNS, name, map[string]string{request.AnnotationPool: "shared"})
		start := time.Now()
		if err := c.r.kube.Create(ctx, svc); err != nil {
			c.mu.Lock()
			c.denied[c.r.denied(err)]++
			c.mu.Unlock()
			c.r.note(churnNS+"/"+name, "create", start, nil, "denied")
			continue
		}
		c.r.note(churnNS+"/"+name, "create", start, svc, "ok")
		c.r.recordCreate(churnNS, name, start, svc.Annotations)
		c.r.checkReturned(svc)
		c.mu.Lock()
		c.created++
		c.mu.Unlock()
		// A preview environment lives long enough for the sweeper to see
		// it used (its uid back-filled): its reservation is then retained
		// for the pool's retention, not the short pending grace of one
		// no Service ever showed.
		c.backfilled(svc)
		if prev != "" {
			c.r.delete(ctx, churnNS, prev)
		}
		prev = name
	}
}

// backfilled waits, 15 s at most, for the uid tag of svc's reservations.
func (c *churn) backfilled(svc *corev1.Service) {
	fixtures.Poll(15*time.Second, 100*time.Millisecond, func() bool {
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
// (it asks pool shared alone), live and retained.
func (c *churn) watch(ctx context.Context) {
	for ctx.Err() == nil {
		var held []string
		booked := 0
		for _, ip := range c.r.env.Emu.IPs() {
			e, ok := ipam.ParseEntry(ip.Tags)
			if !ok || !e.Owns("chaos") || e.Service.Namespace != churnNS {
				continue
			}
			booked++
			c.r.mu.Lock()
			_, shown := c.r.shown[ip.ID]
			c.r.mu.Unlock()
			if shown || e.UID != "" {
				held = append(held, fmt.Sprintf("%s %s %s", ip.ID, ip.Address, e.Service.Name))
			}
		}
		c.mu.Lock()
		c.most, c.booked = max(c.most, len(held)), max(c.booked, booked)
		first := len(held) > churnShare && c.over == ""
		c.mu.Unlock()
		if first {
			for i, h := range held {
				held[i] += " (" + c.r.trail(strings.Fields(h)[0]) + ")"
			}
			c.mu.Lock()
			c.over = strings.Join(held, "\n      ")
			c.mu.Unlock()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check holds the churn to its share and the others clear of its churn:
// the churn namespace never held more than its share, nobody was denied
// "exhausted", the churn went past its share (so the share did make room)
// and at least one reservation was released early for it.
func (c *churn) check(t *testing.T, logs string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.r.mu.Lock()
	exhausted := c.r.denials["pool exhausted"]
	c.r.mu.Unlock()
	early := strings.Count(logs, "released early")
	fmt.Printf("  churn in %s (share %d of pool shared, 24 addresses): %d Services admitted, at most %d reservations held at once (%d booked, counting those no Service was given), %d released early; refusals: %v\n",
		churnNS, churnShare, c.created, c.most, c.booked, early, c.denied)
	if c.most > churnShare {
		t.Errorf("namespace %s held %d addresses of pool shared, more than its share of %d; the first time:\n      %s", churnNS, c.most, churnShare, c.over)
	}
	if exhausted > 0 || c.denied["pool exhausted"] > 0 {
		t.Errorf("denied \"exhausted\": %d of the other clients' operations, %d of the churn's", exhausted, c.denied["pool exhausted"])
	}
	if c.created <= churnShare || early == 0 {
		t.Errorf("vacuous: the churn made %d Services (share %d) and %d reservations were released early", c.created, churnShare, early)
	}
}
