package chaos

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// faults injects rate of failures on every IPAM operation, seeded: server
// errors, rate limits with Retry-After, answers later than the webhook's
// deadline, and bookings (or tag writes, releases) that happen but answer 500.
type faults struct {
	mu     sync.Mutex
	rng    *rand.Rand
	rate   float64
	delay  time.Duration
	counts map[string]*atomic.Int64
	on     atomic.Bool
}

func newFaults(seed uint64, rate float64, delay time.Duration) *faults {
	f := &faults{rng: rand.New(rand.NewPCG(seed, 0xfa017)), rate: rate, delay: delay, counts: map[string]*atomic.Int64{}}
	for _, k := range []string{"503", "500", "429", "timeout", "commit-then-fail"} {
		f.counts[k] = &atomic.Int64{}
	}
	f.on.Store(true)
	return f
}

func (f *faults) inject(op emulator.Op) *emulator.Fault {
	switch op {
	case emulator.OpBookIP, emulator.OpGetIP, emulator.OpListIPs, emulator.OpUpdateIP, emulator.OpReleaseIP:
	default:
		return nil
	}
	if !f.on.Load() {
		return nil
	}
	f.mu.Lock()
	x := f.rng.Float64()
	f.mu.Unlock()
	if x >= f.rate {
		return nil
	}
	x /= f.rate // which kind, uniformly
	write := op == emulator.OpBookIP || op == emulator.OpUpdateIP || op == emulator.OpReleaseIP
	switch {
	case x < 0.25:
		f.counts["503"].Add(1)
		return &emulator.Fault{Status: 503}
	case x < 0.45:
		f.counts["500"].Add(1)
		return &emulator.Fault{Status: 500}
	case x < 0.65:
		f.counts["429"].Add(1)
		return &emulator.Fault{Status: 429, RetryAfter: time.Second}
	case x < 0.80:
		f.counts["timeout"].Add(1)
		return &emulator.Fault{Delay: f.delay}
	case write:
		f.counts["commit-then-fail"].Add(1)
		return &emulator.Fault{Status: 500, CommitThenFail: true}
	}
	f.counts["503"].Add(1)
	return &emulator.Fault{Status: 503}
}

func (f *faults) total() int64 {
	var n int64
	for _, c := range f.counts {
		n += c.Load()
	}
	return n
}
