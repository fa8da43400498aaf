package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// podRestart is how long a killed replica stays down before its Deployment
// has it running again.
const podRestart = 2 * time.Second

// replicaChaos kills replicas during the run, as node failures do, one at
// a time: one replica at a third of the operations, the sweeper's leader
// at two thirds, and at five sixths any replica not killed yet (leadership
// may have moved to the one killed first), so that every replica is
// killed once at least; each without cleanup (its lease is not
// released), each back after podRestart. It also watches the leader: how
// often it changed and how long no replica led.
type replicaChaos struct {
	env   *testenv.Env
	done  *atomic.Int64 // operations done so far
	total int

	mu         sync.Mutex
	kills      []string
	killed     map[string]int // kills by replica name
	failovers  int
	leaderless time.Duration
	last       string
}

// A kill step's choice of victim.
type victim int

const (
	notLeader victim = iota
	leader
	spared // not killed yet
)

func (c *replicaChaos) run(ctx context.Context) {
	steps := []struct {
		at  int64
		who victim
	}{{int64(c.total / 3), notLeader}, {int64(2 * c.total / 3), leader}, {int64(5 * c.total / 6), spared}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	prev := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			c.watchLeader(now.Sub(prev))
			prev = now
			if len(steps) > 0 && c.done.Load() >= steps[0].at && c.ready(steps[0].who) {
				c.kill(ctx, steps[0].who)
				steps = steps[1:]
			}
		}
	}
}

// ready reports whether a kill of who may come: every replica serves (a
// short run's operations come faster than a restart, and a kill while the
// last victim is still down would be an outage of the webhook, not a
// replica's failure), and for the leader's kill, one leads.
func (c *replicaChaos) ready(who victim) bool {
	for _, r := range c.env.Replicas {
		if !r.Serving() {
			return false
		}
	}
	return who != leader || slices.ContainsFunc(c.env.Replicas, (*testenv.Replica).Leading)
}

// watchLeader accounts one tick of leadership. A leader is a process, not
// a name: the killed leader restarted under its name often takes the lease
// again, and that is leadership moving too.
func (c *replicaChaos) watchLeader(d time.Duration) {
	leader := ""
	for _, r := range c.env.Replicas {
		if r.Leading() {
			leader = r.Incarnation()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if leader == "" {
		c.leaderless += d
	} else if c.last != "" && leader != c.last {
		c.failovers++
	}
	if leader != "" {
		c.last = leader
	}
}

// kill kills a replica of the kind who names, and starts it again after
// podRestart. A spared step with every replica killed already does
// nothing.
func (c *replicaChaos) kill(ctx context.Context, who victim) {
	c.mu.Lock()
	killed := maps.Clone(c.killed)
	c.mu.Unlock()
	var target *testenv.Replica
	for _, r := range c.env.Replicas {
		if !r.Serving() {
			continue
		}
		if who == spared && killed[r.Name] == 0 || who != spared && r.Leading() == (who == leader) {
			target = r
			break
		}
	}
	what := map[victim]string{notLeader: "a replica", leader: "the sweeper's leader", spared: "the replica not killed yet"}[who]
	if target == nil {
		if who != spared {
			c.mu.Lock()
			c.kills = append(c.kills, "no replica to kill ("+what+")")
			c.mu.Unlock()
		}
		return
	}
	target.Kill()
	c.mu.Lock()
	c.killed[target.Name]++
	c.kills = append(c.kills, fmt.Sprintf("%s (%s) at operation %d", what, target.Name, c.done.Load()))
	c.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(podRestart):
			if err := target.Start(); err != nil {
				c.mu.Lock()
				c.kills = append(c.kills, "restart failed: "+err.Error())
				c.mu.Unlock()
			}
		}
	}()
}

// unkilled names the replicas never killed.
func (c *replicaChaos) unkilled() []string {
	var out []string
	for _, r := range c.env.Replicas {
		if c.killed[r.Name] == 0 {
			out = append(out, r.Name)
		}
	}
	return out
}

func (c *replicaChaos) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	every := "every replica killed once at least"
	if left := c.unkilled(); len(left) > 0 {
		every = "never killed: " + strings.Join(left, ", ")
	}
	return fmt.Sprintf("  replicas: %d behind one Service; killed without cleanup: %s (%s); leader changes: %d; no sweeper leader for %s in all\n",
		len(c.env.Replicas), strings.Join(c.kills, ", "), every, c.failovers, c.leaderless.Round(100*time.Millisecond))
}

// check fails the run unless every replica was killed, the leader among
// them, and the sweeper's leadership moved at least once: a run that
// killed nothing proves nothing.
func (c *replicaChaos) check(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if left := c.unkilled(); len(left) > 0 || !slices.ContainsFunc(c.kills, func(k string) bool { return strings.HasPrefix(k, "the sweeper's leader (") }) {
		t.Errorf("want every replica killed, the sweeper's leader among them; never killed: %v; kills: %v", left, c.kills)
	}
	if c.failovers < 1 {
		t.Errorf("the sweeper's leadership never moved after the leader was killed")
	}
}
