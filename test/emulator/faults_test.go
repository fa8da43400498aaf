package emulator

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

func TestFaultStatuses(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	id := again(t, srv, pn.ID)
	get := func() error {
		_, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
		return err
	}
	tests := []struct {
		status int
		check  func(t *testing.T, err error)
	}{
		{400, func(t *testing.T, err error) { errAs[*scw.InvalidArgumentsError](t, err) }},
		{401, func(t *testing.T, err error) { errAs[*scw.DeniedAuthenticationError](t, err) }},
		{403, func(t *testing.T, err error) {
			pd := errAs[*scw.PermissionsDeniedError](t, err)
			if len(pd.Details) != 1 || pd.Details[0].Action != "read" || pd.Details[0].Resource != "ip" {
				t.Fatalf("%+v", pd)
			}
		}},
		{404, func(t *testing.T, err error) { errAs[*scw.ResourceNotFoundError](t, err) }},
		{409, func(t *testing.T, err error) { errAs[*scw.TransientStateError](t, err) }},
		{412, func(t *testing.T, err error) { errAs[*scw.PreconditionFailedError](t, err) }},
		{429, func(t *testing.T, err error) { wantResponseError(t, err, 429, "") }},
		{500, func(t *testing.T, err error) {
			re := wantResponseError(t, err, 500, "server_error")
			if string(re.RawBody) != `{"message":"Internal error","type":"server_error"}` {
				t.Fatalf("%s", re.RawBody)
			}
		}},
		{502, func(t *testing.T, err error) { wantResponseError(t, err, 502, "") }},
		{503, func(t *testing.T, err error) { wantResponseError(t, err, 503, "") }},
	}
	for _, tt := range tests {
		srv.FailNext(OpGetIP, 1, Fault{Status: tt.status})
		err := get()
		if err == nil {
			t.Fatalf("%d: no error", tt.status)
		}
		tt.check(t, err)
	}
	if err := get(); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	if n := srv.Count(OpGetIP); n != len(tests)+1 {
		t.Fatalf("%d GetIP calls, want %d", n, len(tests)+1)
	}
}

func TestFailNextQueue(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	id := again(t, srv, pn.ID)
	status := func() int {
		_, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
		var re *scw.ResponseError
		if errors.As(err, &re) {
			return re.StatusCode
		}
		if err != nil {
			t.Fatal(err)
		}
		return 200
	}
	srv.FailNext(OpGetIP, 2, Fault{Status: 503})
	srv.FailNext(OpGetIP, 1, Fault{Status: 500})
	srv.FailNext(OpBookIP, 1, Fault{Status: 500}) // another operation's queue
	var got []int
	for range 4 {
		got = append(got, status())
	}
	if want := []int{503, 503, 500, 200}; !equalInts(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	srv.FailNext(OpGetIP, 5, Fault{Status: 503})
	srv.FailNext(OpGetIP, 0, Fault{})
	if s := status(); s != 200 {
		t.Fatalf("queue not emptied: %d", s)
	}
	if _, err := c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn.ID}}); err == nil {
		t.Fatal("the BookIP fault was not kept for BookIP")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRetryAfter(t *testing.T) {
	srv, _ := setup(t)
	srv.FailNext(OpListIPs, 1, Fault{Status: 429, RetryAfter: 1500 * time.Millisecond})
	srv.FailNext(OpListIPs, 1, Fault{Status: 503, RetryAfter: 30 * time.Second})
	srv.FailNext(OpListIPs, 1, Fault{Status: 500, RetryAfter: time.Second})
	for _, want := range []string{"2", "30", ""} {
		got := raw(t, srv, "GET", "/ipam/v1/regions/fr-par/ips", "", testSecretKey)
		if ra := got.header.Get("Retry-After"); ra != want {
			t.Fatalf("%d: Retry-After %q, want %q", got.status, ra, want)
		}
	}
}

func TestCommitThenFail(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	srv.FailNext(OpBookIP, 1, Fault{CommitThenFail: true})
	_, err := c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn.ID}, Tags: []string{"lost"}})
	wantResponseError(t, err, 500, "server_error")
	ips := srv.IPs()
	if len(ips) != 1 || ips[0].Address.IP.String() != "10.0.0.2" || ips[0].Tags[0] != "lost" {
		t.Fatalf("IPs %+v: the booking must have happened", ips)
	}
	audit := srv.Audit()
	if len(audit) != 1 || audit[0].Kind != AuditBook || !audit[0].AnswerLost || audit[0].Op != OpBookIP || audit[0].IPID != ips[0].ID {
		t.Fatalf("audit %+v", audit)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if last.Op != OpBookIP || last.Status != 500 || !last.Fault || last.IPID != ips[0].ID || last.Method != "POST" || last.Path != "/ipam/v1/regions/fr-par/ips" {
		t.Fatalf("request log %+v", last)
	}

	// Committed, then the connection drops.
	srv.FailNext(OpReleaseIP, 1, Fault{CommitThenFail: true, Drop: true})
	err = c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: ips[0].ID})
	if err == nil || errors.As(err, new(*scw.ResponseError)) {
		t.Fatalf("err = %v, want a connection error", err)
	}
	if len(srv.IPs()) != 0 {
		t.Fatal("the release must have happened")
	}
	// Refused operations commit nothing and still answer the fault.
	srv.FailNext(OpReleaseIP, 1, Fault{Status: 503, CommitThenFail: true})
	err = c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: unknownID})
	wantResponseError(t, err, 503, "")
}

func TestDelayPastDeadline(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	id := again(t, srv, pn.ID)
	srv.FailNext(OpGetIP, 1, Fault{Delay: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id}, scw.WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %s", took)
	}
	// A delay alone answers normally, late.
	srv.FailNext(OpGetIP, 1, Fault{Delay: 50 * time.Millisecond})
	start = time.Now()
	if _, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id}); err != nil || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("err=%v after %s", err, time.Since(start))
	}
}

func TestDropIsAConnectionError(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	id := again(t, srv, pn.ID)
	// A first call leaves a keep-alive connection to reuse: a dropped GET on
	// it must not be replayed by net/http.
	if _, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id}); err != nil {
		t.Fatal(err)
	}
	srv.ResetCounts()
	srv.FailNext(OpGetIP, 1, Fault{Drop: true})
	_, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id})
	if err == nil || errors.As(err, new(*scw.ResponseError)) || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("err = %v, want a connection error", err)
	}
	if n := srv.Count(OpGetIP); n != 1 {
		t.Fatalf("%d calls: the dropped request was replayed", n)
	}
	if _, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id}); err != nil {
		t.Fatalf("after the drop: %v", err)
	}
	// The dropped request is logged when its handler returns, which may come
	// after the client has seen the connection close: wait for the entry.
	dropped := 0
	for deadline := time.Now().Add(5 * time.Second); dropped == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range srv.Requests() {
			if r.Fault && r.Status == 0 {
				dropped++
			}
		}
	}
	if dropped != 1 {
		t.Fatalf("request log holds %d dropped requests, want 1: %+v", dropped, srv.Requests())
	}
}

func TestLatency(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	id := again(t, srv, pn.ID)
	timed := func(f func() error) time.Duration {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	getIP := func() error { _, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: id}); return err }
	listIPs := func() error { _, err := c.ipam.ListIPs(&ipam.ListIPsRequest{}); return err }

	srv.SetLatency("", 40*time.Millisecond)
	srv.SetLatency(OpGetIP, 80*time.Millisecond)
	if d := timed(getIP); d < 80*time.Millisecond {
		t.Fatalf("GetIP took %s", d)
	}
	if d := timed(listIPs); d < 40*time.Millisecond {
		t.Fatalf("ListIPs took %s", d)
	}
	// Removed, a latency long enough that no loaded machine mistakes it.
	srv.SetLatency("", 10*time.Second)
	srv.SetLatency(OpGetIP, 10*time.Second)
	srv.SetLatency("", 0)
	srv.SetLatency(OpGetIP, 0)
	if d := timed(getIP); d >= 5*time.Second {
		t.Fatalf("latency not removed: %s", d)
	}
}

func TestFaultFunc(t *testing.T) {
	srv, c := setup(t)
	var n atomic.Int64
	srv.SetFaultFunc(func(op Op) *Fault {
		if op == OpListIPs && n.Add(1)%2 == 0 {
			return &Fault{Status: 503}
		}
		return nil
	})
	srv.FailNext(OpListIPs, 1, Fault{Status: 500}) // the queue comes first
	var got []string
	for range 5 {
		_, err := c.ipam.ListIPs(&ipam.ListIPsRequest{})
		switch re := (*scw.ResponseError)(nil); {
		case err == nil:
			got = append(got, "ok")
		case errors.As(err, &re):
			got = append(got, re.Status[:3])
		default:
			t.Fatal(err)
		}
	}
	if g := strings.Join(got, " "); g != "500 ok 503 ok 503" {
		t.Fatalf("%s", g)
	}
	srv.SetFaultFunc(nil)
	if _, err := c.ipam.ListIPs(&ipam.ListIPsRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestCountsAndLog(t *testing.T) {
	var lines atomic.Int64
	srv, c := setup(t, func(o *Options) { o.Logf = func(string, ...any) { lines.Add(1) } })
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	srv.ResetCounts()
	ip, err := c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ipam.GetIP(&ipam.GetIPRequest{IPID: unknownID}); err == nil {
		t.Fatal("found")
	}
	counts := srv.Counts()
	// The SDK reads /metadata once per client; newClients did it already.
	if len(counts) != 2 || counts[OpBookIP] != 1 || counts[OpGetIP] != 1 {
		t.Fatalf("counts %v", counts)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if last.Op != OpGetIP || last.Status != 404 || last.IPID != unknownID || last.Fault || last.Time.IsZero() {
		t.Fatalf("log %+v", last)
	}
	if book := reqs[len(reqs)-2]; book.IPID != ip.ID || book.Status != 200 {
		t.Fatalf("log %+v", book)
	}
	if int(lines.Load()) != len(reqs) {
		t.Fatalf("%d log lines for %d requests", lines.Load(), len(reqs))
	}
	srv.ResetCounts()
	if srv.Count(OpBookIP) != 0 || len(srv.Requests()) != len(reqs) {
		t.Fatal("ResetCounts resets counts only")
	}
}
