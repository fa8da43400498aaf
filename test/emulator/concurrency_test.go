package emulator

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

func TestConcurrentBookingsAreDistinct(t *testing.T) {
	srv, c := setup(t)
	pn := mustPN(t, srv, "dc", "10.0.0.0/24")
	const n = 100
	got, errs := bookConcurrently(t, srv, c, pn, n)
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		a := got[i].Address.IP.String()
		if seen[a] {
			t.Fatalf("%s booked twice", a)
		}
		seen[a] = true
		if p := netip.MustParseAddr(a); p.Compare(netip.MustParseAddr("10.0.0.2")) < 0 || p.Compare(netip.MustParseAddr("10.0.0.101")) > 0 {
			t.Fatalf("%s: not among the 100 lowest bookable addresses", a)
		}
	}
	if srv.Count(OpBookIP) != n || len(srv.IPs()) != n {
		t.Fatalf("%d calls, %d IPs", srv.Count(OpBookIP), len(srv.IPs()))
	}

	// Release half concurrently: the freed addresses are booked again.
	releaseAndRebook(t, c, pn, got[:n/2])
	addrs := map[netip.Addr]bool{}
	for _, ip := range srv.IPs() {
		addrs[netip.MustParseAddr(ip.Address.IP.String())] = true
	}
	if len(addrs) != n || addrs[netip.MustParseAddr("10.0.0.102")] {
		t.Fatalf("%d distinct addresses after churn; the lowest free ones must be reused", len(addrs))
	}
}

// bookConcurrently books n IPs in pn at once, the i-th tagged i, while
// readers and other writers run, for the race detector; it returns what
// each booking got.
func bookConcurrently(t *testing.T, srv *Server, c clients, pn PrivateNetwork, n int) ([]*ipam.IP, []error) {
	t.Helper()
	var wg sync.WaitGroup
	got := make([]*ipam.IP, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn.ID}, Tags: []string{fmt.Sprint(i)}})
		})
	}
	for range 10 {
		wg.Go(func() {
			if _, err := c.ipam.ListIPs(&ipam.ListIPsRequest{Tags: []string{"3", "7"}}); err != nil {
				t.Error(err)
			}
			_ = srv.IPs()
			_ = srv.Audit()
			_ = srv.Counts()
		})
	}
	wg.Wait()
	return got, errs
}

// releaseAndRebook releases ips concurrently, then books as many IPs in pn
// concurrently.
func releaseAndRebook(t *testing.T, c clients, pn PrivateNetwork, ips []*ipam.IP) {
	t.Helper()
	var wg sync.WaitGroup
	for _, ip := range ips {
		wg.Go(func() {
			if err := c.ipam.ReleaseIP(&ipam.ReleaseIPRequest{IPID: ip.ID}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for range ips {
		wg.Go(func() {
			if _, err := c.ipam.BookIP(&ipam.BookIPRequest{Source: &ipam.Source{PrivateNetworkID: &pn.ID}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// seedMany books n IPs in one /16, half of them tagged "even".
func seedMany(tb testing.TB, srv *Server, n int) PrivateNetwork {
	tb.Helper()
	pn, err := srv.AddPrivateNetwork("big", "10.0.0.0/16")
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		var tags []string
		if i%2 == 0 {
			tags = []string{"even"}
		}
		if _, err := srv.AddIP(pn.ID, netip.Addr{}, tags, nil); err != nil {
			tb.Fatal(err)
		}
	}
	return pn
}

func TestTenThousandIPs(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	srv, c := setup(t)
	start := time.Now()
	pn := seedMany(t, srv, n)
	seeded := time.Since(start)

	start = time.Now()
	all, err := c.ipam.ListIPs(&ipam.ListIPsRequest{PrivateNetworkID: &pn.ID, PageSize: scw.Uint32Ptr(100)}, scw.WithAllPages())
	if err != nil || len(all.IPs) != n {
		t.Fatalf("%v, %d IPs", err, len(all.IPs))
	}
	listed := time.Since(start)
	even, err := c.ipam.ListIPs(&ipam.ListIPsRequest{Tags: []string{"even"}, PageSize: scw.Uint32Ptr(1000)}, scw.WithAllPages())
	if err != nil || len(even.IPs) != n/2 {
		t.Fatalf("%v, %d even IPs", err, len(even.IPs))
	}
	last := netip.MustParseAddr("10.0.0.2")
	for range n - 1 {
		last = last.Next()
	}
	if newest := all.IPs[0].Address.IP.String(); newest != last.String() {
		t.Fatalf("newest first: got %s, want %s", newest, last)
	}
	t.Logf("%d IPs: seeded in %s, listed in pages of 100 (%d calls) in %s", n, seeded, srv.Count(OpListIPs), listed)
}

func BenchmarkBookIP(b *testing.B) {
	srv := New(Options{})
	pn, err := srv.AddPrivateNetwork("big", "10.0.0.0/8")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := srv.AddIP(pn.ID, netip.Addr{}, []string{"t"}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListIPsPageOver10k(b *testing.B) {
	srv := NewTestServer(b, Options{})
	seedMany(b, srv, 10_000)
	cl, err := scw.NewClient(append(srv.ClientOptions(), scw.WithDefaultRegion(scw.RegionFrPar))...)
	if err != nil {
		b.Fatal(err)
	}
	api := ipam.NewAPI(cl)
	page := int32(0)
	b.ReportAllocs()
	for b.Loop() {
		page = page%100 + 1
		if _, err := api.ListIPs(&ipam.ListIPsRequest{Page: &page, PageSize: scw.Uint32Ptr(100), Tags: []string{"even"}}); err != nil {
			b.Fatal(err)
		}
	}
}
