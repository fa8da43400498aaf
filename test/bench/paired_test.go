package bench

import (
	"testing"
	"time"
)

// kindBlocks builds one kind's blocks: in round i, every hooked create takes
// over its paired un-webhooked one the round's shared drift plus extra.
func kindBlocks(drift []time.Duration, extra func(i int) time.Duration) *pairedBlocks {
	p := &pairedBlocks{}
	for i, d := range drift {
		none := []time.Duration{10 * time.Millisecond, 12 * time.Millisecond, 14 * time.Millisecond}
		hooked := make([]time.Duration, len(none))
		for j, n := range none {
			hooked[j] = n + 20*time.Millisecond + d + extra(i)
		}
		p.add(hooked, none)
	}
	return p
}

// The run's drift is shared by the kinds' blocks of a round: pairedDiff
// leaves it out of the difference and out of its interval, sees a real
// difference, and widens the interval by the rounds' own spread as
// Student's t does: ±200µs alternating over ten rounds is a sample
// standard deviation of 210.8µs, so 0.3 ms ± 1.833·210.8/√10 µs.
func TestPairedDiff(t *testing.T) {
	drift := make([]time.Duration, 10)
	for i := range drift {
		drift[i] = time.Duration(i) * 400 * time.Microsecond // 0 … 3.6 ms along the run
	}
	noise := func(i int) time.Duration { return time.Duration(1-2*(i%2)) * 200 * time.Microsecond }
	zero := func(int) time.Duration { return 0 }
	const extra = 300 * time.Microsecond
	cases := []struct {
		name      string
		a, b      *pairedBlocks
		d, lo, hi time.Duration
	}{
		{"drift alone", kindBlocks(drift, func(int) time.Duration { return extra }), kindBlocks(drift, zero),
			extra, extra, extra},
		{"drift and noise between rounds", kindBlocks(drift, func(i int) time.Duration { return extra + noise(i) }), kindBlocks(drift, zero),
			extra, extra - 122208*time.Nanosecond, extra + 122208*time.Nanosecond},
		{"a real difference", kindBlocks(drift, func(int) time.Duration { return 2 * time.Millisecond }), kindBlocks(drift, zero),
			2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond},
	}
	near := func(got, want time.Duration) bool { return (got - want).Abs() <= time.Microsecond }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, lo, hi := pairedDiff(c.a, c.b)
			if !near(d, c.d) || !near(lo, c.lo) || !near(hi, c.hi) {
				t.Errorf("pairedDiff = %s (90%% interval %s … %s), want %s (%s … %s)", d, lo, hi, c.d, c.lo, c.hi)
			}
		})
	}
	t.Run("rounds that do not match", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("pairedDiff of 10 blocks against 9 returned: every round runs one block of each kind")
			}
		}()
		pairedDiff(kindBlocks(drift, zero), kindBlocks(drift[:9], zero))
	})
}

// A round's work spilling into the next block shows as a gap between the
// two orders' means.
func TestTurnMeans(t *testing.T) {
	drift := make([]time.Duration, 10)
	spill := func(i int) time.Duration { return time.Duration(i%2) * time.Millisecond } // odd rounds only
	fwd, rev := turnMeans(kindBlocks(drift, spill), kindBlocks(drift, func(int) time.Duration { return 0 }))
	if fwd != 0 || rev != time.Millisecond {
		t.Errorf("turnMeans = %s / %s, want 0s / 1ms", fwd, rev)
	}
}

// bootstrapDiff resamples whole rounds: a drift shared by a round's blocks
// leaves the p99 difference's interval at the difference itself.
func TestBootstrapDiffResamplesRounds(t *testing.T) {
	drift := make([]time.Duration, 10)
	for i := range drift {
		drift[i] = time.Duration(i) * 400 * time.Microsecond
	}
	a := kindBlocks(drift, func(int) time.Duration { return time.Millisecond })
	b := kindBlocks(drift, func(int) time.Duration { return 0 })
	lo, hi := bootstrapDiff(a.hooked, b.hooked, .99)
	if lo > time.Millisecond || hi < time.Millisecond || hi-lo > 500*time.Microsecond {
		t.Errorf("p99 difference's interval %s … %s: a 1 ms difference with a drift shared by rounds", lo, hi)
	}
}
