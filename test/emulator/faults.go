package emulator

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Op names an API operation, as the SDK method that calls it.
type Op string

// The operations the emulator serves.
const (
	OpBookIP                        Op = "BookIP"
	OpGetIP                         Op = "GetIP"
	OpListIPs                       Op = "ListIPs"
	OpUpdateIP                      Op = "UpdateIP"
	OpReleaseIP                     Op = "ReleaseIP"
	OpReleaseIPSet                  Op = "ReleaseIPSet"
	OpAttachIP                      Op = "AttachIP"
	OpDetachIP                      Op = "DetachIP"
	OpMoveIP                        Op = "MoveIP"
	OpGetPrivateNetwork             Op = "GetPrivateNetwork"
	OpListPrivateNetworks           Op = "ListPrivateNetworks"
	OpCreatePrivateNetwork          Op = "CreatePrivateNetwork"
	OpDeletePrivateNetwork          Op = "DeletePrivateNetwork"
	OpListSubnets                   Op = "ListSubnets"
	OpCreateVPC                     Op = "CreateVPC"
	OpGetVPC                        Op = "GetVPC"
	OpListVPCs                      Op = "ListVPCs"
	OpDeleteVPC                     Op = "DeleteVPC"
	OpEnableCustomRoutesPropagation Op = "EnableCustomRoutesPropagation"
	OpMetadata                      Op = "Metadata"
	OpCreateProject                 Op = "CreateProject"
	OpGetProject                    Op = "GetProject"
	OpDeleteProject                 Op = "DeleteProject"

	// Load Balancer API v1, zoned.
	OpCreateLB               Op = "CreateLB"
	OpGetLB                  Op = "GetLB"
	OpListLBs                Op = "ListLBs"
	OpDeleteLB               Op = "DeleteLB"
	OpAttachLBPrivateNetwork Op = "AttachPrivateNetwork"
	OpDetachLBPrivateNetwork Op = "DetachPrivateNetwork"
	OpListLBPrivateNetworks  Op = "ListLBPrivateNetworks"
	OpUpdateLB               Op = "UpdateLB"
	OpMigrateLB              Op = "MigrateLB"
	OpCreateFrontend         Op = "CreateFrontend"
	OpListFrontends          Op = "ListFrontends"
	OpGetFrontend            Op = "GetFrontend"
	OpUpdateFrontend         Op = "UpdateFrontend"
	OpDeleteFrontend         Op = "DeleteFrontend"
	OpListACLs               Op = "ListACLs"
	OpSetACLs                Op = "SetACLs"
	OpCreateBackend          Op = "CreateBackend"
	OpListBackends           Op = "ListBackends"
	OpGetBackend             Op = "GetBackend"
	OpUpdateBackend          Op = "UpdateBackend"
	OpDeleteBackend          Op = "DeleteBackend"
	OpSetBackendServers      Op = "SetBackendServers"
	OpUpdateHealthCheck      Op = "UpdateHealthCheck"

	// The Load Balancer API's flexible IPs: its SDK methods are CreateIP,
	// GetIP, ListIPs and ReleaseIP, named here apart from IPAM's.
	OpCreateLBIP  Op = "CreateLBIP"
	OpGetLBIP     Op = "GetLBIP"
	OpListLBIPs   Op = "ListLBIPs"
	OpReleaseLBIP Op = "ReleaseLBIP"
)

// Fault shapes the answer to one call.
type Fault struct {
	// Status answered, with the real Scaleway error body for that status
	// (500: {"message":"Internal error","type":"server_error"}). 0 with no
	// other field set answers normally.
	Status int
	// RetryAfter sets the Retry-After header (whole seconds, rounded up) on
	// a 429 or 503.
	RetryAfter time.Duration
	// Delay is waited before anything else, in real time; the wait ends
	// early when the client gives up (its context is done) or the server
	// closes. With no other field set the call is then answered normally.
	Delay time.Duration
	// CommitThenFail performs the operation (state changes, audit events
	// marked AnswerLost) and then answers Status, 500 when Status is 0: the
	// client believes it failed.
	CommitThenFail bool
	// Drop ends the connection without an answer: the client gets a
	// connection error. With CommitThenFail, the operation is performed
	// first.
	Drop bool
}

type queuedFault struct {
	f Fault
	n int
}

// faults is the plan of injected latency and faults: per-operation delays,
// FailNext queues and a fault function. Its lock is its own, never held
// with the state's.
type faults struct {
	// lock, not mu: Server promotes the state's mu.
	lock    sync.Mutex
	latency map[Op]time.Duration
	queued  map[Op][]queuedFault
	fn      func(Op) *Fault
}

func newFaults() faults {
	return faults{latency: map[Op]time.Duration{}, queued: map[Op][]queuedFault{}}
}

// SetLatency makes every call of op wait d (real time) before anything else;
// op "" sets it for all operations without a latency of their own. d <= 0
// removes it.
func (fs *faults) SetLatency(op Op, d time.Duration) {
	fs.lock.Lock()
	defer fs.lock.Unlock()
	if d <= 0 {
		delete(fs.latency, op)
		return
	}
	fs.latency[op] = d
}

func (fs *faults) latencyFor(op Op) time.Duration {
	fs.lock.Lock()
	defer fs.lock.Unlock()
	if d, ok := fs.latency[op]; ok {
		return d
	}
	return fs.latency[""]
}

// FailNext gives f to the next n calls of op, after those already queued for
// op. n <= 0 empties op's queue.
func (fs *faults) FailNext(op Op, n int, f Fault) {
	fs.lock.Lock()
	defer fs.lock.Unlock()
	if n <= 0 {
		delete(fs.queued, op)
		return
	}
	fs.queued[op] = append(fs.queued[op], queuedFault{f: f, n: n})
}

// SetFaultFunc installs fn, consulted on every call whose FailNext queue is
// empty: a nil result answers normally. fn runs outside the emulator's locks
// and may be called concurrently; nil removes it. Meant for seeded chaos runs.
func (fs *faults) SetFaultFunc(fn func(op Op) *Fault) {
	fs.lock.Lock()
	defer fs.lock.Unlock()
	fs.fn = fn
}

// takeFault is the fault of the next call of op: the head of its FailNext
// queue, else the fault function's, else nil.
func (fs *faults) takeFault(op Op) *Fault {
	fs.lock.Lock()
	if q := fs.queued[op]; len(q) > 0 {
		f := q[0].f
		q[0].n--
		if q[0].n == 0 {
			q = q[1:]
		}
		if len(q) == 0 {
			delete(fs.queued, op)
		} else {
			fs.queued[op] = q
		}
		fs.lock.Unlock()
		return &f
	}
	fn := fs.fn
	fs.lock.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op)
}

// writeFault answers f's status with the Scaleway body for it.
func writeFault(w http.ResponseWriter, op Op, f *Fault, status int) {
	if f.RetryAfter > 0 && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		secs := int64((f.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	writeReply(w, reply{status: status, body: faultBody(op, status)})
}

// faultStatus is the status a fault answers: 500 unless it names one.
func faultStatus(f *Fault) int {
	if f.Status == 0 {
		return http.StatusInternalServerError
	}
	return f.Status
}

// dropConnection ends the connection without an HTTP answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// The server then aborts the response and closes the connection.
		panic(http.ErrAbortHandler)
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	// A bare close on a reused keep-alive connection makes net/http's
	// Transport silently replay idempotent requests (GET) on a new
	// connection, so the client would never see the drop. A status line and
	// then the close is a connection cut mid-answer: the client gets
	// "unexpected EOF", never a response and never a replay.
	_, _ = buf.WriteString("HTTP/1.1 502 Bad Gateway\r\n")
	_ = buf.Flush()
	_ = conn.Close()
}
