package interleavings

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// schedule releases gated calls in a fixed order. Each step is
// "<party>:<op>"; a call whose step is still ahead waits for its turn, one
// already passed (or never scheduled) goes through. A party that finishes
// without making its remaining steps (it decided not to) has them skipped.
type schedule struct {
	mu       sync.Mutex
	cond     *sync.Cond
	steps    []string
	next     int
	finished map[string]bool
	made     []string // the steps made, in order
}

func newSchedule(steps []string) *schedule {
	s := &schedule{steps: steps, finished: map[string]bool{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func party(step string) string { p, _, _ := strings.Cut(step, ":"); return p }

func (s *schedule) skip() {
	for s.next < len(s.steps) && s.finished[party(s.steps[s.next])] {
		s.next++
	}
	s.cond.Broadcast()
}

// enter blocks until step's turn; false when step is not ahead.
func (s *schedule) enter(step string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.steps[s.next:], step) {
		return false
	}
	for s.steps[s.next] != step {
		s.cond.Wait()
	}
	return true
}

func (s *schedule) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made = append(s.made, s.steps[s.next])
	s.next++
	s.skip()
}

func (s *schedule) finish(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished[p] = true
	s.skip()
}

// gatedCloud holds one party's GetIP, ListIPs, SetTags and ReleaseIP calls
// until the schedule lets them through.
type gatedCloud struct {
	scaleway.Cloud
	party string
	s     *schedule
}

func (c gatedCloud) gate(op string) func() {
	if c.s.enter(c.party + ":" + op) {
		return c.s.leave
	}
	return func() {}
}

func (c gatedCloud) GetIP(ctx context.Context, id string) (*scaleway.IP, error) {
	defer c.gate("GetIP")()
	return c.Cloud.GetIP(ctx, id)
}

func (c gatedCloud) ListIPs(ctx context.Context, f scaleway.ListFilter) ([]*scaleway.IP, error) {
	defer c.gate("ListIPs")()
	return c.Cloud.ListIPs(ctx, f)
}

func (c gatedCloud) SetTags(ctx context.Context, id string, tags []string) (*scaleway.IP, error) {
	defer c.gate("SetTags")()
	return c.Cloud.SetTags(ctx, id, tags)
}

func (c gatedCloud) ReleaseIP(ctx context.Context, id string) error {
	defer c.gate("ReleaseIP")()
	return c.Cloud.ReleaseIP(ctx, id)
}

// bookingCloud gates BookIP too: a retry that books the address the
// sweeper is releasing.
type bookingCloud struct{ gatedCloud }

func (c bookingCloud) BookIP(ctx context.Context, r scaleway.BookRequest) (*scaleway.IP, error) {
	defer c.gate("BookIP")()
	return c.Cloud.BookIP(ctx, r)
}

// orders are every interleaving of two parties' steps, each party's own
// order kept.
func orders(a, b []string) [][]string {
	if len(a) == 0 || len(b) == 0 {
		return [][]string{append(slices.Clone(a), b...)}
	}
	var out [][]string
	for _, rest := range orders(a[1:], b) {
		out = append(out, append([]string{a[0]}, rest...))
	}
	for _, rest := range orders(a, b[1:]) {
		out = append(out, append([]string{b[0]}, rest...))
	}
	return out
}

// run makes the parties' calls through the schedule s at once and waits.
func run(s *schedule, parties map[string]func()) {
	var wg sync.WaitGroup
	for name, f := range parties {
		wg.Go(func() {
			defer s.finish(name)
			f()
		})
	}
	wg.Wait()
}
