package scaleway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
)

// TestClassifyThroughSDK sends real requests through scaleway-sdk-go to the
// emulator answering with real Scaleway error bodies, and checks the kind:
// some arrive as typed SDK errors with no status, others as ResponseError.
func TestClassifyThroughSDK(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
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
	tests := []struct {
		name  string
		fault *scalewaytest.Fault
		call  func() error
		want  Kind
	}{
		{"404 typed not_found", nil, func() error { _, err := e.cloud.GetIP(ctx, "00000000-0000-4000-8000-000000000000"); return err }, KindNotFound},
		{"404 unknown private network", nil, func() error {
			_, err := e.cloud.GetPrivateNetwork(ctx, "00000000-0000-4000-8000-000000000001")
			return err
		}, KindNotFound},
		{"409 already_exists", nil, func() error { return book(pn, "172.16.32.7") }, KindAddressTaken},
		{"out_of_stock", nil, func() error { return book(full.ID, "") }, KindExhausted},
		{"400 invalid_arguments", nil, func() error { return book(pn, "10.9.9.9") }, KindInvalid},
		{"412 precondition on release of attached", nil, func() error {
			if err := e.srv.Attach(taken, scalewaytest.Resource{Type: "lb_server", ID: "lb", Name: "lb"}); err != nil {
				return err
			}
			defer e.srv.Detach(taken)
			return e.cloud.ReleaseIP(ctx, taken)
		}, KindInvalid},
		{"401 denied_authentication", &scalewaytest.Fault{Status: 401}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindPermissionDenied},
		{"403 permissions_denied", &scalewaytest.Fault{Status: 403}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindPermissionDenied},
		{"429 after retries", &scalewaytest.Fault{Status: 429}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
		{"500 after retries", &scalewaytest.Fault{Status: 500}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
		{"503 after retries", &scalewaytest.Fault{Status: 503}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
		{"dropped connection", &scalewaytest.Fault{Drop: true}, func() error { _, err := e.cloud.GetIP(ctx, taken); return err }, KindUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault != nil {
				e.srv.FailNext(scalewaytest.OpGetIP, 100, *tt.fault)
				defer e.srv.FailNext(scalewaytest.OpGetIP, 0, scalewaytest.Fault{})
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
		{&scw.DeniedAuthenticationError{}, KindPermissionDenied},
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
	e.srv.FailNext(scalewaytest.OpGetIP, 2, scalewaytest.Fault{Status: 503})
	e.srv.ResetCounts()
	ip, err := e.cloud.GetIP(context.Background(), id)
	if err != nil || ip.Address != mustAddr("172.16.32.9") {
		t.Fatalf("ip=%+v err=%v", ip, err)
	}
	if n := e.srv.Count(scalewaytest.OpGetIP); n != 3 {
		t.Fatalf("%d calls, want 3 (two failures, one success)", n)
	}
}

func TestBookIsNotRetriedBlindly(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	e.srv.FailNext(scalewaytest.OpBookIP, 1, scalewaytest.Fault{Status: 500})
	e.srv.ResetCounts()
	_, err := e.cloud.BookIP(context.Background(), BookRequest{PrivateNetworkID: e.pns["dc"].ID})
	if Classify(err) != KindUnavailable || e.srv.Count(scalewaytest.OpBookIP) != 1 {
		t.Fatalf("err=%v calls=%d: a 500 on booking may have committed and must reach the allocator", err, e.srv.Count(scalewaytest.OpBookIP))
	}
	// A 429 is a refusal before any work: retried.
	e.srv.FailNext(scalewaytest.OpBookIP, 1, scalewaytest.Fault{Status: 429})
	e.srv.ResetCounts()
	if _, err := e.cloud.BookIP(context.Background(), BookRequest{PrivateNetworkID: e.pns["dc"].ID}); err != nil {
		t.Fatal(err)
	}
	if n := e.srv.Count(scalewaytest.OpBookIP); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
}

func TestRetryNeverPassesDeadline(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	id, _ := e.srv.AddIP(e.pns["dc"].ID, mustAddr("172.16.32.9"), nil, nil)
	// The server asks for an hour of patience; the caller has 10 s (ample
	// for the first call on a loaded machine): it gives up at once.
	e.srv.FailNext(scalewaytest.OpGetIP, 100, scalewaytest.Fault{Status: 429, RetryAfter: time.Hour})
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
	if n := e.srv.Count(scalewaytest.OpGetIP); n != 1 {
		t.Fatalf("%d calls: a Retry-After beyond the deadline must stop the retries", n)
	}
}

func TestSlowAnswerPastDeadline(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	id, _ := e.srv.AddIP(e.pns["dc"].ID, mustAddr("172.16.32.9"), nil, nil)
	e.srv.FailNext(scalewaytest.OpGetIP, 1, scalewaytest.Fault{Delay: 10 * time.Second})
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

// TestListIPsPages: more IPs than a page holds are listed in several pages
// of DefaultPageSize, until total_count, and every IP is seen once; pages
// shorter than asked (an API with a lower cap) do not end the listing.
func TestListIPsPages(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	const n = 250
	want := map[string]bool{}
	for range n {
		id, err := e.srv.AddIP(e.pns["dc"].ID, netip.Addr{}, []string{clusterTag}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	if _, err := e.srv.AddIP(e.pns["dc"].ID, netip.Addr{}, []string{"someone-else"}, nil); err != nil {
		t.Fatal(err)
	}
	// A proxy in front of the emulator that caps every page at 40 IPs,
	// whatever page_size asks for.
	capped := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		target, _ := url.Parse(e.srv.URL())
		r.SetURL(target)
		if q := r.Out.URL.Query(); q.Has("page_size") {
			q.Set("page_size", "40")
			r.Out.URL.RawQuery = q.Encode()
		}
	}})
	t.Cleanup(capped.Close)

	for _, tt := range []struct {
		name  string
		url   string
		pages int
	}{
		{"pages of 100", e.srv.URL(), 3},
		{"pages capped at 40", capped.URL, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud, err := New(context.Background(), Options{Region: "fr-par", ClientOptions: []scw.ClientOption{
				scw.WithAPIURL(tt.url), scw.WithAuth(testAccessKey, testSecretKey), scw.WithDefaultProjectID(testProject)}})
			if err != nil {
				t.Fatal(err)
			}
			from := len(e.srv.Requests())
			ips, err := cloud.ListIPs(context.Background(), ListFilter{Tags: []string{clusterTag}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, ip := range ips {
				if got[ip.ID] {
					t.Errorf("%s listed twice", ip.ID)
				}
				got[ip.ID] = true
			}
			if len(ips) != n || !maps.Equal(got, want) {
				t.Fatalf("listed %d IPs, want the %d tagged ones", len(ips), n)
			}
			var pages []string
			for _, r := range e.srv.Requests()[from:] {
				if r.Op == scalewaytest.OpListIPs {
					u, _ := url.Parse(r.Path)
					pages = append(pages, u.Query().Get("page")+"/"+u.Query().Get("page_size"))
				}
			}
			if len(pages) != tt.pages {
				t.Fatalf("%d ListIPs calls (%v), want %d", len(pages), pages, tt.pages)
			}
			if tt.url == e.srv.URL() && !slices.Equal(pages, []string{"1/100", "2/100", "3/100"}) {
				t.Fatalf("pages %v, want 1/100 2/100 3/100", pages)
			}
		})
	}
}

// TestListIPsAcrossReleases: IPAM pages by offset, so an IP released
// between two pages from a page already read moves every later IP one
// place towards the front, and the first IP of the next page slides into
// the page already read; total_count shrinks with it. Every IP that exists
// for the whole listing is still listed, exactly once.
func TestListIPsAcrossReleases(t *testing.T) {
	for _, tt := range []struct {
		name        string
		oldestFirst bool
		// after this many ListIPs answers, release release of the IPs they
		// listed (from the first on) and book book new ones
		after, release, book int
		calls                int
	}{
		// 250 IPs in pages of 50: 5 pages when nothing changes.
		{name: "one released from page 1", after: 1, release: 1, calls: 7},
		{name: "more than a page released from pages 1 and 2", after: 2, release: 60, calls: 7},
		{name: "every IP of page 1 released", after: 1, release: 50, calls: 6},
		{name: "oldest first, one released from page 1 and one booked", oldestFirst: true, after: 1, release: 1, book: 1, calls: 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "dc=172.16.32.0/22")
			whole := map[string]bool{}
			for range 250 {
				id, err := e.srv.AddIP(e.pns["dc"].ID, netip.Addr{}, []string{clusterTag}, nil)
				if err != nil {
					t.Fatal(err)
				}
				whole[id] = true
			}
			var mu sync.Mutex
			var listed []string // by the answers so far, in order
			answers := 0
			proxy := httptest.NewServer(&httputil.ReverseProxy{
				Rewrite: func(r *httputil.ProxyRequest) {
					target, _ := url.Parse(e.srv.URL())
					r.SetURL(target)
					mu.Lock()
					defer mu.Unlock()
					if !isListIPs(r.In) || answers != tt.after {
						return
					}
					for _, id := range listed[:tt.release] {
						if err := e.cloud.ReleaseIP(r.In.Context(), id); err != nil {
							t.Error(err)
						}
						delete(whole, id)
					}
					for range tt.book {
						if _, err := e.srv.AddIP(e.pns["dc"].ID, netip.Addr{}, []string{clusterTag}, nil); err != nil {
							t.Error(err)
						}
					}
				},
				ModifyResponse: func(resp *http.Response) error {
					if !isListIPs(resp.Request) {
						return nil
					}
					body, err := io.ReadAll(resp.Body)
					if err != nil {
						return err
					}
					resp.Body = io.NopCloser(bytes.NewReader(body))
					var page struct {
						IPs []struct {
							ID string `json:"id"`
						} `json:"ips"`
					}
					if err := json.Unmarshal(body, &page); err != nil {
						return err
					}
					mu.Lock()
					defer mu.Unlock()
					answers++
					for _, ip := range page.IPs {
						listed = append(listed, ip.ID)
					}
					return nil
				},
			})
			t.Cleanup(proxy.Close)
			cloud, err := New(context.Background(), Options{Region: "fr-par", PageSize: 50, ClientOptions: []scw.ClientOption{
				scw.WithAPIURL(proxy.URL), scw.WithAuth(testAccessKey, testSecretKey), scw.WithDefaultProjectID(testProject)}})
			if err != nil {
				t.Fatal(err)
			}
			ips, err := cloud.ListIPs(context.Background(), ListFilter{Tags: []string{clusterTag}, OldestFirst: tt.oldestFirst})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			calls := answers
			mu.Unlock()
			got := map[string]int{}
			for _, ip := range ips {
				got[ip.ID]++
			}
			missing := 0
			for id := range whole {
				if got[id] != 1 {
					missing++
					t.Errorf("%s, there for the whole listing, listed %d times", id, got[id])
				}
			}
			if missing > 0 {
				t.Fatalf("%d of the %d IPs there for the whole listing not listed once (%d listed, %d ListIPs calls)", missing, len(whole), len(ips), calls)
			}
			if tt.oldestFirst && !slices.IsSortedFunc(ips, func(a, b *IP) int { return a.CreatedAt.Compare(b.CreatedAt) }) {
				t.Error("not listed oldest first")
			}
			if calls != tt.calls {
				t.Errorf("%d ListIPs calls, want %d", calls, tt.calls)
			}
		})
	}
}

// isListIPs reports whether r asks for a page of ListIPs.
func isListIPs(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/ipam/v1/regions/fr-par/ips")
}
