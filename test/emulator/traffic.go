package emulator

import (
	"sync"
	"time"
)

// Request is one HTTP call the emulator received.
type Request struct {
	Time   time.Time
	Op     Op // "" when no route matched
	Method string
	Path   string // path and query
	// UserAgent tells the callers apart (the webhook, the Scaleway CCM).
	UserAgent string
	// Status answered; 0 when the connection was dropped or the client left
	// before the answer.
	Status int
	// IPID is the IP the call was about (the booked one for BookIP), if any.
	IPID string
	// Fault tells that an injected fault shaped the answer.
	Fault    bool
	Duration time.Duration
}

// maxRequests bounds the request log so that long benchmarks do not grow
// without limit; the oldest entries go first.
const maxRequests = 100_000

// traffic is what the emulator was asked: per-operation call counts and
// the request log. Its lock is its own, never held with the state's.
type traffic struct {
	// lock, not mu: Server promotes the state's mu.
	lock     sync.Mutex
	counts   map[Op]int
	requests []Request
}

func (tr *traffic) count(op Op) {
	tr.lock.Lock()
	tr.counts[op]++
	tr.lock.Unlock()
}

func (tr *traffic) record(r Request) {
	tr.lock.Lock()
	defer tr.lock.Unlock()
	if len(tr.requests) >= maxRequests {
		// Drop the oldest tenth at once so that trimming stays cheap.
		n := copy(tr.requests, tr.requests[maxRequests/10:])
		tr.requests = tr.requests[:n]
	}
	tr.requests = append(tr.requests, r)
}

// Count is the number of HTTP calls of op, answered with success or not,
// since the start or the last ResetCounts.
func (tr *traffic) Count(op Op) int {
	tr.lock.Lock()
	defer tr.lock.Unlock()
	return tr.counts[op]
}

// Counts is a copy of all per-operation call counts.
func (tr *traffic) Counts() map[Op]int {
	tr.lock.Lock()
	defer tr.lock.Unlock()
	out := make(map[Op]int, len(tr.counts))
	for k, v := range tr.counts {
		out[k] = v
	}
	return out
}

// ResetCounts sets every call count to zero. The request log is kept.
func (tr *traffic) ResetCounts() {
	tr.lock.Lock()
	defer tr.lock.Unlock()
	clear(tr.counts)
}

// Requests is a copy of the request log, oldest first (the most recent
// 100,000 at most).
func (tr *traffic) Requests() []Request {
	tr.lock.Lock()
	defer tr.lock.Unlock()
	return append([]Request(nil), tr.requests...)
}
