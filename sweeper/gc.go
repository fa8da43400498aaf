package sweeper

import (
	"runtime/debug"
	"sync"
)

// cycleGCPercent is the GC percent during a cycle, given the process's:
// half of it, but not below 50 (collecting more often would cost more CPU
// than the memory it saves), and never above a user's lower GOGC; off
// stays off.
func cycleGCPercent(current int) int {
	if current < 0 {
		return current
	}
	return min(current, max(current/2, 50))
}

// lowered counts the cycles running in the process. The GC percent is the
// process's, and several sweepers may run at once (a test's replicas): the
// first cycle lowers it and the last one restores it, or a cycle ending
// while another runs would restore the other's lowered percent for good.
var lowered struct {
	sync.Mutex
	cycles int
	before int
}

// lowerGC sets the cycle's GC percent (cycleGCPercent) and returns what
// restores the process's.
func lowerGC() (restore func()) {
	lowered.Lock()
	defer lowered.Unlock()
	if lowered.cycles == 0 {
		lowered.before = debug.SetGCPercent(-1)
		debug.SetGCPercent(cycleGCPercent(lowered.before))
	}
	lowered.cycles++
	return func() {
		lowered.Lock()
		defer lowered.Unlock()
		if lowered.cycles--; lowered.cycles == 0 {
			debug.SetGCPercent(lowered.before)
		}
	}
}
