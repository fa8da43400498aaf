package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// DefaultProjectID is the project of seeded objects when Options.ProjectID is
// empty. It is also the organization when Options.OrganizationID is empty: a
// Scaleway account's default project carries its organization's ID.
const DefaultProjectID = "0d3e5f4a-6b7c-4d8e-9f01-23456789abcd"

// DefaultRegion is the region served when Options.Region is empty.
const DefaultRegion = "fr-par"

// Options configures a Server.
type Options struct {
	// Region served; requests for any other region get 404. Default fr-par.
	Region string
	// ProjectID is the project of seeded objects and of API objects created
	// without one. Default DefaultProjectID.
	ProjectID string
	// OrganizationID of the default project and of objects in projects the
	// emulator does not know. Default ProjectID.
	OrganizationID string
	// SecretKey, when set, is a key of the organisation's owner (every
	// permission set on every Project). With Keys, the keys Scaleway IAM
	// knows; a call with another token is answered 401 and one its key may
	// not make 403. With neither, any non-empty token is the owner's.
	SecretKey string
	Keys      []Key
	// Clock gives every timestamp (created_at, updated_at, logs). Default
	// the real clock. Injected delays always use real time.
	Clock clock.PassiveClock
	// Logf, when set, receives one line per HTTP request.
	Logf func(format string, args ...any)
	// LBDeleteDelay is how long a deleted Load Balancer stays in status
	// to_delete, still holding its Private Network attachments and their
	// IPs, before it is gone: Scaleway deletes them asynchronously, in tens
	// of seconds. Zero removes it within the DeleteLB call. Real time;
	// Close drops the removals still pending.
	LBDeleteDelay time.Duration
	// LBCreateDelay is how long a created Load Balancer stays to_create,
	// then creating, before it is ready and takes changes; zero makes it
	// ready at once. The emulator's clock measures it.
	LBCreateDelay time.Duration
	// LBSettleDelay is how long a change takes on a Load Balancer: its
	// instance pending after a frontend, backend or update, an attached
	// Private Network pending, a detached one still listed (pending). Zero
	// settles at once. The emulator's clock measures it.
	LBSettleDelay time.Duration
}

// ScalewayLBDeleteDelay is about how long Scaleway takes to delete a Load
// Balancer: a recording of the real API answers GET 200 "to_delete" right
// after the DELETE and 404 only 30 s later. make run and cmd/scw-emulator
// delete this late; the suites choose shorter delays per test.
const ScalewayLBDeleteDelay = 30 * time.Second

// ScalewayLBCreateDelay and ScalewayLBSettleDelay are Scaleway's, from the
// recordings (shared/scaleway-recordings/lb): a Load Balancer is ready about
// 3 s after CreateLB (its updated_at says so), an attachment about 2 s after
// AttachPrivateNetwork, and its instance is pending less than a second
// after a change. cmd/scw-emulator uses them by default.
const (
	ScalewayLBCreateDelay = 3 * time.Second
	ScalewayLBSettleDelay = 2 * time.Second
)

// maxBody bounds a request body; real requests are a few hundred bytes.
const maxBody = 4 << 20

// Server is the emulator. It implements http.Handler; Start serves it on a
// listener of its own. All methods are safe for concurrent use.
//
// Server itself only serves: it routes each call to the type of its API,
// after the fault plan. Its other methods are its parts': Audit (the shared
// state), AddIP and the IP snapshots (IPAM), AddPrivateNetwork and its
// variants (VPC), LBs and HoldLBDeletion (Load Balancer), SetLatency,
// FailNext and SetFaultFunc (faults), Count and Requests (traffic).
type Server struct {
	*cloud
	// The API types, embedded for their Go API.
	*ipamAPI
	*vpcAPI
	*lbAPI
	routes []route

	// The fault plan and what was asked have locks of their own: injecting
	// and observing never wait on the state.
	faults
	traffic
	iam *keyring

	// life guards the listener state.
	life      sync.Mutex
	httpSrv   *http.Server
	url       string
	closeOnce sync.Once
}

// New returns an emulator with no objects but the default project. It does
// not listen: use Start, NewTestServer, or mount it as an http.Handler.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.ProjectID == "" {
		opts.ProjectID = DefaultProjectID
	}
	if opts.OrganizationID == "" {
		opts.OrganizationID = opts.ProjectID
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	cl := newCloud(opts)
	s := &Server{
		cloud:   cl,
		ipamAPI: &ipamAPI{cl},
		vpcAPI:  &vpcAPI{cl},
		lbAPI:   &lbAPI{cl},
		faults:  newFaults(),
		iam:     newKeyring(opts),
		traffic: traffic{counts: map[Op]int{}},
	}
	s.routes = buildRoutes(apis{
		ipam: s.ipamAPI, vpc: s.vpcAPI, account: &accountAPI{cl}, lb: s.lbAPI,
		lbIP: &lbIPAPI{cl}, frontend: &frontendAPI{cl}, backend: &backendAPI{cl},
	})
	return s
}

// NewTestServer starts an emulator on 127.0.0.1:0 and closes it when the test
// ends.
func NewTestServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s := New(opts)
	if _, err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in the background. It
// returns the base URL to give to scw.WithAPIURL.
func (s *Server) Start(addr string) (string, error) {
	s.life.Lock()
	defer s.life.Unlock()
	if s.httpSrv != nil {
		return "", errors.New("emulator: already started")
	}
	select {
	case <-s.done:
		return "", errors.New("emulator: closed")
	default:
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("emulator: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.httpSrv = srv
	s.url = "http://" + ln.Addr().String()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logf("emulator: serve: %v", err)
		}
	}()
	return s.url, nil
}

// URL is the base URL Start returned, or "" before Start.
func (s *Server) URL() string {
	s.life.Lock()
	defer s.life.Unlock()
	return s.url
}

// Close stops serving and ends pending injected delays. It does not wait for
// handlers still running: delayed ones return as soon as Close is called.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	s.life.Lock()
	srv := s.httpSrv
	s.life.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("emulator: close: %w", err)
	}
	return nil
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// --- serving ---

// ServeHTTP answers one API request. The call is logged before its answer
// leaves: a client holding its answer finds the call in Requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt, pp := s.match(r)
	rec := Request{Time: s.clock.Now(), Method: r.Method, Path: r.URL.RequestURI(), UserAgent: r.UserAgent()}
	if rt != nil {
		rec.Op = rt.op
	}
	c := &call{r: r, op: rec.Op, region: pp.region, zone: pp.zone, id: pp.id, query: r.URL.Query()}
	out := s.serve(c, rt)
	rec.Status, rec.Fault, rec.IPID = out.status, out.fault, c.ipID
	rec.Duration = time.Since(start)
	s.record(rec)
	s.logf("%s %s -> %d (%s, %s)", rec.Method, rec.Path, rec.Status, opName(rec.Op), rec.Duration.Round(time.Microsecond))
	if out.answer != nil {
		out.answer(w)
	}
}

// outcome is what serve decided: the status to answer (0 for none),
// whether a fault shaped it, and how to write it.
type outcome struct {
	status int
	fault  bool
	answer func(http.ResponseWriter)
}

func replied(rep reply, fault bool) outcome {
	return outcome{status: rep.status, fault: fault, answer: func(w http.ResponseWriter) { writeReply(w, rep) }}
}

func faulted(op Op, f *Fault) outcome {
	status := faultStatus(f)
	return outcome{status: status, fault: true, answer: func(w http.ResponseWriter) { writeFault(w, op, f, status) }}
}

// serve runs the fault plan and the handler, and decides the answer.
func (s *Server) serve(c *call, rt *route) outcome {
	if rt == nil {
		// Unknown routes are not an operation: not counted, no faults.
		return replied(s.handle(c, nil), false)
	}
	s.count(c.op)
	if !s.sleep(c.r.Context(), s.latencyFor(c.op)) {
		return outcome{}
	}
	f := s.takeFault(c.op)
	if f == nil {
		return replied(s.handle(c, rt), false)
	}
	if !s.sleep(c.r.Context(), f.Delay) {
		return outcome{fault: true}
	}
	if f.Drop {
		if f.CommitThenFail {
			c.lost = true
			s.handle(c, rt)
		}
		return outcome{fault: true, answer: dropConnection}
	}
	if f.CommitThenFail {
		c.lost = true
		s.handle(c, rt) // its answer is lost: the client gets the fault's
		return faulted(c.op, f)
	}
	if f.Status != 0 {
		return faulted(c.op, f)
	}
	// A pure delay: answer normally, late.
	return replied(s.handle(c, rt), true)
}

// handle authenticates, checks the region, reads the body and runs rt.
func (s *Server) handle(c *call, rt *route) reply {
	key, known := s.authenticate(c.r)
	if c.op != OpMetadata && !known {
		return errDeniedAuthentication()
	}
	if rt == nil {
		return errUnknownRoute(c.r.Method, c.r.URL.Path)
	}
	if c.region != "" && c.region != s.opts.Region {
		return errUnknownRegion(c.region)
	}
	if c.zone != "" && !s.zoneServed(c.zone) {
		return errUnknownZone(c.zone)
	}
	if c.r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(c.r.Body, maxBody))
		if err != nil {
			return errInvalidArguments("body", "reading the request body: "+err.Error())
		}
		c.body = b
	}
	if denied := s.authorize(key, c); denied != nil {
		return *denied
	}
	return rt.h(c)
}

// sleep waits d of real time; false when the client left or the server
// closed first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}
