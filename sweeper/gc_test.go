package sweeper

import (
	"context"
	"errors"
	"runtime/debug"
	"testing"
)

// gcPercent reads the process's GC percent.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// setGCPercent sets the GC percent for the test, restored after it.
func setGCPercent(t *testing.T, p int) {
	before := debug.SetGCPercent(p)
	t.Cleanup(func() { debug.SetGCPercent(before) })
}

func TestCycleGCPercent(t *testing.T) {
	for current, want := range map[int]int{100: 50, 200: 100, 60: 50, 50: 50, 40: 40, 10: 10, -1: -1} {
		if got := cycleGCPercent(current); got != want {
			t.Errorf("GOGC=%d: %d during the cycle, want %d", current, got, want)
		}
	}
}

// TestCycleRestoresGCPercent: the percent is lowered for the cycle only,
// its end restores the process's, failed cycles included.
func TestCycleRestoresGCPercent(t *testing.T) {
	setGCPercent(t, 100)
	w := newWorld(t)
	w.sweep(w.sweeper())
	if got := gcPercent(); got != 100 {
		t.Fatalf("GC percent %d after a cycle, want 100 back", got)
	}
	s := w.sweeper(func(o *Options) { o.Synced = func() bool { return false } })
	if _, err := s.Sweep(context.Background()); !errors.Is(err, ErrNotSynced) {
		t.Fatal(err)
	}
	if got := gcPercent(); got != 100 {
		t.Fatalf("GC percent %d after a failed cycle, want 100 back", got)
	}
}

// TestOverlappingCyclesRestoreGCPercent: two sweepers' cycles in one
// process, the first ending while the second runs: the last to end
// restores the process's percent, not the lowered one.
func TestOverlappingCyclesRestoreGCPercent(t *testing.T) {
	setGCPercent(t, 100)
	one := lowerGC()
	if got := gcPercent(); got != 50 {
		t.Fatalf("GC percent %d during a cycle, want 50", got)
	}
	two := lowerGC()
	one()
	if got := gcPercent(); got != 50 {
		t.Fatalf("GC percent %d while a cycle still runs, want 50", got)
	}
	two()
	if got := gcPercent(); got != 100 {
		t.Fatalf("GC percent %d after both cycles, want 100 back", got)
	}
}

// TestGCOffStaysOff: GOGC=off is the user's to keep.
func TestGCOffStaysOff(t *testing.T) {
	setGCPercent(t, -1)
	restore := lowerGC()
	if got := gcPercent(); got != -1 {
		t.Fatalf("GC percent %d during a cycle with GOGC=off", got)
	}
	restore()
	if got := gcPercent(); got != -1 {
		t.Fatalf("GC percent %d after a cycle with GOGC=off", got)
	}
}
