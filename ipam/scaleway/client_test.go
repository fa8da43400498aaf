package scaleway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// classifyCase is a call to the emulator through the SDK, the fault the
// emulator answers GetIP with (nil: none), and the kind of its error.
type classifyCase struct {
	name  string
	fault *emulator.Fault
	call  func() error
	want  Kind
}

// classifyCases are TestClassifyThroughSDK's, on e: an address taken in
// its network dc and a network whose subnet IPAM keeps whole.
func classifyCases(t *testing.T, e *env) []classifyCase {
	t.Helper()
	ctx := context.Background()
	pn := e.pns["dc"].ID
	taken, err := e.srv.AddIP(pn, mustAddr("172.16.32.7"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, err := e.srv.AddPrivateNetwork("full", "10.0.0.0/30") // only IPAM's own four
	if err != nil {
		t.Fatal(err)
	}
	book := func(pnID, addr string) error {
		req := BookRequest{PrivateNetworkID: pnID}
		if addr != "" {
			req.Address = mustAddr(addr)
		}
		_, err := e.cloud.BookIP(ctx, req)
		return err
	}
	return []classifyCase{
		{"404 typed not_found", nil, func() error { _, err := e.cloud.GetIP(ctx, "00000000-0000-4000-8000-000000000000"); return err }, KindNotFound},
		{"404 unknown private network", nil, func() error {
			_, err := e.cloud.GetPrivateNetwork(ctx, "00000000-0000-4000-8000-000000000001")
			return err
		}, KindNotFound},
		{"409 already_exists", nil, func() error { return book(pn, "172.16.32.7") }, KindAddressTaken},
		{"out_of_stock", nil, func() error { return book(full.ID, "") }, KindExhausted},
		{"400 invalid_arguments", nil, func() error { return book(pn, "10.9.9.9") }, KindInvalid},
		{"412 precondition on release of attached", nil, func() error {
			if err := e.srv.Attach(taken, emulator.Resource{Type: "lb_server", ID: "lb", Name: "lb"}); err != nil {
				return err
			}
			defer e.srv.Detach(taken)
			return e.cloud.ReleaseIP(ctx, taken)
		}, KindInvalid},
		{"401 denied_authentication", &emulator.Fault{Status: 401}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnauthenticated},
		{"403 permissions_denied", &emulator.Fault{Status: 403}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindPermissionDenied},
		{"429 after retries", &emulator.Fault{Status: 429}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
		{"500 after retries", &emulator.Fault{Status: 500}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
		{"503 after retries", &emulator.Fault{Status: 503}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
		{"dropped connection", &emulator.Fault{Drop: true}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
	}
}

// TestClassifyThroughSDK sends real requests through scaleway-sdk-go to the
// emulator answering with real Scaleway error bodies, and checks the kind:
// some arrive as typed SDK errors with no status, others as ResponseError.
func TestClassifyThroughSDK(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	for _, tt := range classifyCases(t, e) {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault != nil {
				e.srv.FailNext(emulator.OpGetIP, 100, *tt.fault)
				defer e.srv.FailNext(emulator.OpGetIP, 0, emulator.Fault{})
			}
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			if got := Classify(err); got != tt.want {
				t.Fatalf("Classify = %s, want %s (%T: %v)", got, tt.want, err, err)
			}
		})
	}
}

func TestClassifyTypedAndStatus(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want Kind
	}{
		{&scw.ResourceNotFoundError{Resource: "ip"}, KindNotFound},
		{&scw.PermissionsDeniedError{}, KindPermissionDenied},
		{&scw.DeniedAuthenticationError{}, KindUnauthenticated},
		{&scw.OutOfStockError{}, KindExhausted},
		{&scw.QuotasExceededError{}, KindExhausted},
		{&scw.TransientStateError{}, KindUnavailable},
		{&scw.InvalidArgumentsError{}, KindInvalid},
		{&scw.ResponseError{StatusCode: 409, Type: "already_exists"}, KindAddressTaken},
		{&scw.ResponseError{StatusCode: 409, Type: "transient_state"}, KindUnavailable},
		{&scw.ResponseError{StatusCode: 403, Type: "authorization_required"}, KindPermissionDenied},
		{&scw.ResponseError{StatusCode: 404, Message: "certificate not Found"}, KindNotFound},
		{&scw.ResponseError{StatusCode: 429}, KindUnavailable},
		{&scw.ResponseError{StatusCode: 502}, KindUnavailable},
		{&scw.ResponseError{StatusCode: 422}, KindInvalid},
		{fmt.Errorf("wrapped: %w", &scw.ResourceNotFoundError{}), KindNotFound},
		{context.DeadlineExceeded, KindUnavailable},
		{errors.New("something else"), KindOther},
	} {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%T %v) = %s, want %s", tt.err, tt.err, got, tt.want)
		}
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	id, _ := e.srv.AddIP(e.pns["dc"].ID, mustAddr("172.16.32.9"), nil, nil)
	e.srv.FailNext(emulator.OpGetIP, 2, emulator.Fault{Status: 503})
	e.srv.ResetCounts()
	ip, err := e.cloud.GetIP(context.Background(), id)
	if err != nil || ip.Address != mustAddr("172.16.32.9") {
		t.Fatalf("ip=%+v err=%v", ip, err)
	}
	if n := e.srv.Count(emulator.OpGetIP); n != 3 {
		t.Fatalf("%d calls, want 3 (two failures, one success)", n)
	}
}

func TestBookIsNotRetriedBlindly(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	e.srv.FailNext(emulator.OpBookIP, 1, emulator.Fault{Status: 500})
	e.srv.ResetCounts()
	_, err := e.cloud.BookIP(context.Background(), BookRequest{PrivateNetworkID: e.pns["dc"].ID})
	if Classify(err) != KindUnavailable || e.srv.Count(emulator.OpBookIP) != 1 {
		t.Fatalf("err=%v calls=%d: a 500 on booking may have committed and must reach the allocator", err, e.srv.Count(emulator.OpBookIP))
	}
	// A 429 is a refusal before any work: retried.
	e.srv.FailNext(emulator.OpBookIP, 1, emulator.Fault{Status: 429})
	e.srv.ResetCounts()
	if _, err := e.cloud.BookIP(context.Background(), BookRequest{PrivateNetworkID: e.pns["dc"].ID}); err != nil {
		t.Fatal(err)
	}
	if n := e.srv.Count(emulator.OpBookIP); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
}

func TestRetryNeverPassesDeadline(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	id, _ := e.srv.AddIP(e.pns["dc"].ID, mustAddr("172.16.32.9"), nil, nil)
	// The server asks for an hour of patience; the caller has 10 s (ample
	// for the first call on a loaded machine): it gives up at once.
	e.srv.FailNext(emulator.OpGetIP, 100, emulator.Fault{Status: 429, RetryAfter: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.cloud.GetIP(ctx, id)
	if Classify(err) != KindUnavailable {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("returned after %s: waited for a Retry-After beyond the caller's deadline", took)
	}
	if n := e.srv.Count(emulator.OpGetIP); n != 1 {
		t.Fatalf("%d calls: a Retry-After beyond the deadline must stop the retries", n)
	}
}

func TestSlowAnswerPastDeadline(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	id, _ := e.srv.AddIP(e.pns["dc"].ID, mustAddr("172.16.32.9"), nil, nil)
	e.srv.FailNext(emulator.OpGetIP, 1, emulator.Fault{Delay: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := e.cloud.GetIP(ctx, id)
	if !errors.Is(err, context.DeadlineExceeded) || Classify(err) != KindUnavailable {
		t.Fatalf("err = %v (%s)", err, Classify(err))
	}
}

func TestNewCloudRejectsBadCredentials(t *testing.T) {
	e := newEnv(t)
	_, err := New(context.Background(), Options{Region: "fr-par", ClientOptions: []scw.ClientOption{scw.WithAPIURL(e.srv.URL()), scw.WithAuth(testAccessKey, "not-a-uuid-secret")}})
	if err == nil {
		t.Fatal("accepted a malformed secret key")
	}
	if strings.Contains(err.Error(), "not-a-uuid-secret") {
		t.Fatalf("the secret key appears in the error: %v", err)
	}
	if _, err := New(context.Background(), Options{Region: "mars-1"}); err == nil || !strings.Contains(err.Error(), "mars-1") {
		t.Fatalf("bad region: %v", err)
	}
}
