package bench

import (
	"testing"
	"time"
)

// rounds builds one kind's blocks: in round i, every hooked create takes
// over its paired un-webhooked one the round's shared drift plus extra.
func rounds(drift []time.Duration, extra func(i int) time.Duration) *pairedBlocks {
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
// leaves it out of the difference and out of its interval, and still sees
// a real difference and the noise between rounds.
func TestPairedDiff(t *testing.T) {
	drift := make([]time.Duration, 10)
	for i := range drift {
		drift[i] = time.Duration(i) * 400 * time.Microsecond // 0 … 3.6 ms along the run
	}
	noise := func(i int) time.Duration { return time.Duration(1-2*(i%2)) * 200 * time.Microsecond }
	const extra = 300 * time.Microsecond
	cases := []struct {
		name   string
		a, b   *pairedBlocks
		d      time.Duration
		lo, hi time.Duration // the interval must lie within
	}{
		{"drift alone", rounds(drift, func(int) time.Duration { return extra }), rounds(drift, func(int) time.Duration { return 0 }),
			extra, extra, extra},
		{"drift and noise between rounds", rounds(drift, func(i int) time.Duration { return extra + noise(i) }), rounds(drift, func(int) time.Duration { return 0 }),
			extra, extra - 200*time.Microsecond, extra + 200*time.Microsecond},
		{"a real difference", rounds(drift, func(int) time.Duration { return 2 * time.Millisecond }), rounds(drift, func(int) time.Duration { return 0 }),
			2 * time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, lo, hi := pairedDiff(c.a, c.b)
			if d != c.d || lo < c.lo || hi > c.hi || lo > d || hi < d {
				t.Errorf("pairedDiff = %s (90%% interval %s … %s), want %s within %s … %s", d, lo, hi, c.d, c.lo, c.hi)
			}
		})
	}
	t.Run("noise between rounds widens the interval", func(t *testing.T) {
		_, lo, hi := pairedDiff(rounds(drift, func(i int) time.Duration { return extra + noise(i) }), rounds(drift, func(int) time.Duration { return 0 }))
		if hi-lo < 100*time.Microsecond {
			t.Errorf("interval %s … %s: rounds ±200µs apart must not give a point", lo, hi)
		}
	})
	t.Run("rounds that do not match", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("pairedDiff of 10 blocks against 9 returned: every round runs one block of each kind")
			}
		}()
		pairedDiff(rounds(drift, func(int) time.Duration { return 0 }), rounds(drift[:9], func(int) time.Duration { return 0 }))
	})
}
