package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// sweepInterval is the replicas' --sweep-interval: short, so that a short
// run sees many cycles and its releases come soon after they are due.
const sweepInterval = time.Second

// cycles counts the sweeper's cycles over the run from the replicas'
// metrics (scw_lb_ipam_sweeper_cycle_duration_seconds' count and sum), and
// the leader terms they ran in. A restarted replica is a new process whose
// histogram starts at 0: each incarnation's reading is kept apart, the
// last one, and summed.
type cycles struct {
	env *testenv.Env

	mu      sync.Mutex
	start   time.Time
	end     time.Time
	base    map[string]sweepReading // before the run, of the incarnations already up
	seen    map[string]sweepReading
	leading map[string]bool
	terms   int
}

// sweepReading is one incarnation's cycles and the time they took.
type sweepReading struct {
	n    uint64
	took time.Duration
}

func newCycles(env *testenv.Env) *cycles {
	return &cycles{env: env, base: map[string]sweepReading{}, seen: map[string]sweepReading{}, leading: map[string]bool{}}
}

// run samples every replica until ctx ends.
func (c *cycles) run(ctx context.Context) {
	c.sample(true)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.sample(false)
			return
		case <-tick.C:
			c.sample(false)
		}
	}
}

// sample reads each replica's count. A restart between reading its
// incarnation and its count can only credit the old incarnation with the
// new one's smaller count, which keeping the larger reading ignores.
func (c *cycles) sample(first bool) {
	now := time.Now()
	for _, r := range c.env.Replicas {
		inc, leads := r.Incarnation(), r.Leading()
		n, took := r.SweepTime()
		c.mu.Lock()
		if first {
			c.start, c.base[inc] = now, sweepReading{n, took}
		}
		if n >= c.seen[inc].n {
			c.seen[inc] = sweepReading{n, took}
		}
		if leads && !c.leading[inc] {
			c.terms++
		}
		c.leading[inc] = leads
		c.end = now
		c.mu.Unlock()
	}
}

// total is the cycles run since the first sample and the time they took,
// the time the sampling covers and the leader terms seen.
func (c *cycles) total() (n int, took, d time.Duration, terms int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for inc, seen := range c.seen {
		base := c.base[inc]
		if base.n > seen.n {
			base = sweepReading{}
		}
		n += int(seen.n - base.n)
		took += seen.took - base.took
	}
	return n, took, c.end.Sub(c.start), c.terms
}

// cycleBound is the most cycles a leader that never loops runs in d over
// terms leader terms. Sweeper.Start runs one cycle as a term begins, then
// one after each of: a tick (the ticker drops those it cannot deliver: one
// an interval), a trigger (it waits out the debounce: one a debounce), a
// release coming due (a second past a release-at later than the start of
// the cycle that saw it, in whole seconds: one a second); each term adds
// one of each for the rounding. The check allows
// twice it: the loop it is for runs thousands of cycles a second, and the
// slack absorbs the sampling's edges (a term too short to be seen).
func cycleBound(d, interval, debounce time.Duration, terms int) int {
	terms = max(terms, 1)
	perSecond := float64(time.Second)/float64(interval) + float64(time.Second)/float64(debounce) + 1
	return 2 * (4*terms + int(d.Seconds()*perSecond+0.5))
}

// summary is the report's line on the cycles.
func (c *cycles) summary() string {
	n, took, d, terms := c.total()
	perMinute, mean := 0.0, time.Duration(0)
	if d > 0 {
		perMinute = float64(n) / d.Minutes()
	}
	if n > 0 {
		mean = took / time.Duration(n)
	}
	return fmt.Sprintf("  sweeper: %d cycles in %s over %d leader terms, %.1f a minute, %s each on average (interval %s, debounce %s; more than %d fails the run)\n",
		n, d.Round(time.Second), terms, perMinute, mean.Round(time.Millisecond), sweepInterval, sweeper.DefaultDebounce, cycleBound(d, sweepInterval, sweeper.DefaultDebounce, terms))
}

// check fails the run when the leader looped: more cycles than its
// interval, triggers and due releases account for, or none at all (the
// count read nothing).
func (c *cycles) check(t *testing.T) {
	t.Helper()
	n, _, d, terms := c.total()
	if bound := cycleBound(d, sweepInterval, sweeper.DefaultDebounce, terms); n > bound {
		t.Errorf("the sweeper ran %d cycles in %s over %d leader terms, more than the %d its interval (%s), debounce (%s) and due releases allow: it loops",
			n, d.Round(time.Second), terms, bound, sweepInterval, sweeper.DefaultDebounce)
	}
	if n == 0 || terms == 0 {
		t.Errorf("vacuous: %d sweeper cycles over %d leader terms counted", n, terms)
	}
}

// The bound on hand-made counts: a check that cannot fail proves nothing.
func TestCycleBound(t *testing.T) {
	const run = 5 * time.Minute
	for _, tc := range []struct {
		name   string
		cycles int
		terms  int
		loops  bool
	}{
		// Every source at its most: a tick a second, a trigger each
		// debounce, a due release each second, a first cycle each term.
		{name: "ticks, triggers and due releases at their most", cycles: 300 + 60 + 300 + 3, terms: 3},
		{name: "a tick a second", cycles: 300, terms: 1},
		// A stale release-at made the leader rerun its cycle at once,
		// thousands of times a second: two seconds of it are enough.
		{name: "two seconds of a loop at 1000 cycles a second", cycles: 300 + 2000, terms: 1, loops: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound := cycleBound(run, sweepInterval, sweeper.DefaultDebounce, tc.terms)
			if loops := tc.cycles > bound; loops != tc.loops {
				t.Errorf("%d cycles in %s over %d terms against a bound of %d: loops %v, want %v", tc.cycles, run, tc.terms, bound, loops, tc.loops)
			}
		})
	}
}
