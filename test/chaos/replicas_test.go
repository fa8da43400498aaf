package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
)

// podRestart is how long a killed replica stays down before its Deployment
// has it running again.
const podRestart = 2 * time.Second

// replicaChaos kills replicas during the run, as node failures do: one
// replica at a third of the operations, the sweeper's leader at two thirds,
// each without cleanup (its lease is not released), each back after
// podRestart. It also watches the leader: how often it changed and how long
// no replica led.
type replicaChaos struct {
	env   *testenv.Env
	done  *atomic.Int64 // operations done so far
	total int

	mu         sync.Mutex
	kills      []string
	killed     int // replicas actually killed
	failovers  int
	leaderless time.Duration
	last       string
}

func (c *replicaChaos) run(ctx context.Context) {
	steps := []struct {
		at     int64
		leader bool
	}{{int64(c.total / 3), false}, {int64(2 * c.total / 3), true}}
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
			if len(steps) > 0 && c.done.Load() >= steps[0].at {
				c.kill(ctx, steps[0].leader)
				steps = steps[1:]
			}
		}
	}
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

// kill kills the leader, or a replica that does not lead, and starts it
// again after podRestart.
func (c *replicaChaos) kill(ctx context.Context, leader bool) {
	var victim *testenv.Replica
	for _, r := range c.env.Replicas {
		if r.Serving() && r.Leading() == leader {
			victim = r
			break
		}
	}
	if victim == nil {
		c.mu.Lock()
		c.kills = append(c.kills, fmt.Sprintf("no replica to kill (leader=%v)", leader))
		c.mu.Unlock()
		return
	}
	what := "a replica"
	if leader {
		what = "the sweeper's leader"
	}
	victim.Kill()
	c.mu.Lock()
	c.killed++
	c.kills = append(c.kills, fmt.Sprintf("%s (%s) at operation %d", what, victim.Name, c.done.Load()))
	c.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(podRestart):
			if err := victim.Start(); err != nil {
				c.mu.Lock()
				c.kills = append(c.kills, "restart failed: "+err.Error())
				c.mu.Unlock()
			}
		}
	}()
}

func (c *replicaChaos) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("  replicas: %d behind one Service; killed without cleanup: %s; leader changes: %d; no sweeper leader for %s in all\n",
		len(c.env.Replicas), strings.Join(c.kills, ", "), c.failovers, c.leaderless.Round(100*time.Millisecond))
}

// check fails the run unless both kills happened and the sweeper's
// leadership moved at least once: a run that killed nothing proves nothing.
func (c *replicaChaos) check(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed != 2 {
		t.Errorf("%d replicas killed, want 2 (a replica, then the leader): %v", c.killed, c.kills)
	}
	if c.failovers < 1 {
		t.Errorf("the sweeper's leadership never moved after the leader was killed")
	}
}
