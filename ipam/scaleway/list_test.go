package scaleway

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// addTagged adds n IPs tagged as this cluster's to e's network dc, and
// returns their IDs.
func addTagged(t *testing.T, e *env, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for range n {
		id, err := e.srv.AddIP(e.pns["dc"].ID, netip.Addr{}, []string{clusterTag}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

// cloudAt is a Cloud of region fr-par whose requests go to apiURL, listing in
// pages of pageSize (0: DefaultPageSize).
func cloudAt(t *testing.T, apiURL string, pageSize uint32) Cloud {
	t.Helper()
	cloud, err := New(context.Background(), Options{Region: "fr-par", PageSize: pageSize, ClientOptions: []scw.ClientOption{
		scw.WithAPIURL(apiURL), scw.WithAuth(testAccessKey, testSecretKey), scw.WithDefaultProjectID(testProject)}})
	if err != nil {
		t.Fatal(err)
	}
	return cloud
}

// TestListIPsPages: more IPs than a page holds are listed in several pages
// of DefaultPageSize, until total_count, and every IP is seen once; pages
// shorter than asked (an API with a lower cap) do not end the listing.
func TestListIPsPages(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	const n = 250
	want := addTagged(t, e, n)
	if _, err := e.srv.AddIP(e.pns["dc"].ID, netip.Addr{}, []string{"someone-else"}, nil); err != nil {
		t.Fatal(err)
	}
	capped := cappedProxy(t, e.srv.URL())
	for _, tt := range []struct {
		name  string
		url   string
		pages int
	}{
		{"pages of 100", e.srv.URL(), 3},
		{"pages capped at 40", capped.URL, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cloud := cloudAt(t, tt.url, 0)
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
			pages := listedPages(e.srv.Requests()[from:])
			if len(pages) != tt.pages {
				t.Fatalf("%d ListIPs calls (%v), want %d", len(pages), pages, tt.pages)
			}
			if tt.url == e.srv.URL() && !slices.Equal(pages, []string{"1/100", "2/100", "3/100"}) {
				t.Fatalf("pages %v, want 1/100 2/100 3/100", pages)
			}
		})
	}
}

// cappedProxy is a proxy in front of the emulator at upstream that caps
// every page at 40 IPs, whatever page_size asks for.
func cappedProxy(t *testing.T, upstream string) *httptest.Server {
	t.Helper()
	capped := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		target, _ := url.Parse(upstream)
		r.SetURL(target)
		if q := r.Out.URL.Query(); q.Has("page_size") {
			q.Set("page_size", "40")
			r.Out.URL.RawQuery = q.Encode()
		}
	}})
	t.Cleanup(capped.Close)
	return capped
}

// listedPages are the page/page_size of the ListIPs calls among reqs.
func listedPages(reqs []emulator.Request) []string {
	var pages []string
	for _, r := range reqs {
		if r.Op == emulator.OpListIPs {
			u, _ := url.Parse(r.Path)
			pages = append(pages, u.Query().Get("page")+"/"+u.Query().Get("page_size"))
		}
	}
	return pages
}

// churnCase is a listing during which IPs are released and booked.
type churnCase struct {
	name        string
	oldestFirst bool
	// after this many ListIPs answers, release release of the IPs they
	// listed (from the first on) and book book new ones
	after, release, book int
	calls                int
}

// TestListIPsAcrossReleases: IPAM pages by offset, so an IP released
// between two pages from a page already read moves every later IP one
// place towards the front, and the first IP of the next page slides into
// the page already read; total_count shrinks with it. Every IP that exists
// for the whole listing is still listed, exactly once.
func TestListIPsAcrossReleases(t *testing.T) {
	for _, tt := range []churnCase{
		// 250 IPs in pages of 50: 5 pages when nothing changes.
		{name: "one released from page 1", after: 1, release: 1, calls: 7},
		{name: "more than a page released from pages 1 and 2", after: 2, release: 60, calls: 7},
		{name: "every IP of page 1 released", after: 1, release: 50, calls: 6},
		{name: "oldest first, one released from page 1 and one booked", oldestFirst: true, after: 1, release: 1, book: 1, calls: 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "dc=172.16.32.0/22")
			whole := addTagged(t, e, 250)
			proxy := newChurningProxy(t, e, tt, whole)
			ips, err := cloudAt(t, proxy.URL, 50).ListIPs(context.Background(), ListFilter{Tags: []string{clusterTag}, OldestFirst: tt.oldestFirst})
			if err != nil {
				t.Fatal(err)
			}
			calls := proxy.answered()
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

// churningProxy is a proxy in front of the emulator that, once it has
// answered tt.after ListIPs calls, releases the first tt.release IPs they
// listed (and drops them from whole) and books tt.book new ones before the
// next ListIPs call goes through.
type churningProxy struct {
	*httptest.Server
	mu      sync.Mutex
	listed  []string // by the answers so far, in order
	answers int
}

func newChurningProxy(t *testing.T, e *env, tt churnCase, whole map[string]bool) *churningProxy {
	t.Helper()
	p := &churningProxy{}
	p.Server = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			target, _ := url.Parse(e.srv.URL())
			r.SetURL(target)
			p.mu.Lock()
			defer p.mu.Unlock()
			if !isListIPs(r.In) || p.answers != tt.after {
				return
			}
			for _, id := range p.listed[:tt.release] {
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
		ModifyResponse: p.record,
	})
	t.Cleanup(p.Close)
	return p
}

// record counts a ListIPs answer and notes the IPs it lists.
func (p *churningProxy) record(resp *http.Response) error {
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
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers++
	for _, ip := range page.IPs {
		p.listed = append(p.listed, ip.ID)
	}
	return nil
}

// answered is how many ListIPs calls the proxy answered.
func (p *churningProxy) answered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answers
}

// isListIPs reports whether r asks for a page of ListIPs.
func isListIPs(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/ipam/v1/regions/fr-par/ips")
}
