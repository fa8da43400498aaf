package integration

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/claims"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// TestBringYourOwnAcrossReplicas: two allocators that share
// nothing but the emulator and the apiserver (their own Scaleway clients,
// Service caches and claim clients, as two webhook replicas have) validate
// the same bring-your-own IPAM ID for two Services at the same moment:
// exactly one wins, for every ID. Without the claim both win, which is the
// race this closes (the caches know neither Service yet).
func TestBringYourOwnAcrossReplicas(t *testing.T) {
	scenario(t, func(t *testing.T) {
		const ids = 12
		byo := make([]string, ids)
		for i := range byo {
			id, err := s.Emu.AddIP(s.PNs["edge"].ID, netipOf(t, "10.10.0.", 150+i), []string{"reserved-by-terraform"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			byo[i] = id
		}
		one, two := replica(t, true), replica(t, true)
		wins := race(t, one, two, byo)
		for i, n := range wins {
			if n != 1 {
				t.Errorf("IPAM ID %s: %d Services won, want exactly 1", byo[i], n)
			}
		}
		// The same race without the claim: both win.
		bare1, bare2 := replica(t, false), replica(t, false)
		double := 0
		for _, n := range race(t, bare1, bare2, byo[:1]) {
			if n == 2 {
				double++
			}
		}
		if double != 1 {
			t.Fatalf("without claims the race was not reproduced (%d double wins): the test does not drive it", double)
		}
	})
}

// replica is an allocator with its own Scaleway client, Service cache and
// claims, as one webhook replica has.
func replica(t *testing.T, withClaims bool) *allocator.Allocator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: "fr-par", ClientOptions: s.ScalewayOptions()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ipam.ParseConfig([]byte(s.PoolFile()))
	if err != nil {
		t.Fatal(err)
	}
	if err := inventory.Resolve(ctx, cloud, cfg); err != nil {
		t.Fatal(err)
	}
	c, err := s.Client(nil)
	if err != nil {
		t.Fatal(err)
	}
	services, err := servicecache.NewInformer(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = services.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), services.HasSynced) {
		t.Fatal("cache not synced")
	}
	o := allocator.Options{Cloud: cloud, Config: cfg, References: services.Records(), Claims: allocator.NoClaims{}}
	if withClaims {
		o.Claims = &claims.Leases{Client: c, Reader: c, Namespace: "default", Fresh: 2 * webhookTimeout, Clock: clock.RealClock{}}
	}
	return fixtures.Must(allocator.New(o))
}

// race validates each ID for Service web/a-<i> on one replica and web/b-<i>
// on the other at the same moment; it returns how many won per ID.
func race(t *testing.T, one, two *allocator.Allocator, ids []string) []int {
	t.Helper()
	wins := make([]int, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, id := range ids {
		start := make(chan struct{})
		for _, side := range []struct {
			a    *allocator.Allocator
			name string
		}{{one, "a"}, {two, "b"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				svc := types.NamespacedName{Namespace: "web", Name: side.name + "-" + id[:8]}
				if _, err := side.a.ValidateID(context.Background(), ipam.IDRequest{ID: id, Service: svc}); err == nil {
					mu.Lock()
					wins[i]++
					mu.Unlock()
				} else if ipam.ReasonOf(err) != ipam.ReasonIDNotUsable {
					t.Errorf("%s: %v", svc, err)
				}
			}()
		}
		close(start)
	}
	wg.Wait()
	return wins
}

func netipOf(t *testing.T, prefix string, i int) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(prefix + strconv.Itoa(i))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// listedSince reports whether r's index of dc-link was listed after t.
func listedSince(r *testenv.Replica, t time.Time) bool {
	age, ok := r.Gauge("scw_lb_ipam_index_age_seconds", "pool", "dc-link")
	return !ok || time.Duration(age*float64(time.Second)) < time.Since(t)
}

// TestRecreateOnTheReplicaThatDidNotBook: replica 0 books the
// Service's IP; the Service is deleted and re-created through replica 1,
// whose last listing of the pool predates that booking. Its reservation
// index has not seen the IP, but its Service cache showed it on the
// Service: the re-create gets it back (invariant 8 across replicas), with
// a re-read and no booking.
func TestRecreateOnTheReplicaThatDidNotBook(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		one, two := s.Replicas[0], s.Replicas[1]
		// Replica 1's background listing runs every minute: try again with
		// another name in the rare case it listed between the booking and
		// the re-create (then the index, not the cache, would find X).
		for attempt := range 3 {
			name := fmt.Sprintf("moved-%d", attempt)
			restore := routeTo(t, one)
			created1, created2 := one.Creates(), two.Creates()
			booked := time.Now()
			if err := s.Kube.Create(ctx, fixtures.PrivateService("payments", name, map[string]string{request.AnnotationPool: "dc-link"})); err != nil {
				restore()
				t.Fatal(err)
			}
			x := get(t, "payments", name).Annotations[ccm.AnnotationPrivateIPIDs]
			attachedTo(t, "payments", name, x)
			// A sweep between the delete and the re-create marks X
			// orphaned: used, it stays reusable for retention − margin
			// (4 s), pending only for the grace − margin (2 s).
			backfilled(t, get(t, "payments", name), x)
			// What the scenario is about: replica 1 learnt of X through its
			// Service cache, not through a listing. The cache lags the
			// apiserver by moments, by more on a loaded machine: the
			// re-create waits for it (when the re-create comes first, a
			// fresh IP is the documented answer).
			key := types.NamespacedName{Namespace: "payments", Name: name}
			fixtures.Eventually(t, 10*time.Second, poll, "replica 1 to see "+x+" through its Service cache", func() bool {
				return two.Remembers(key, x) || listedSince(two, booked)
			})
			seen := time.Since(booked)
			s.RouteTo(two)
			del(t, get(t, "payments", name))
			from := len(s.Emu.Requests())
			err := s.Kube.Create(ctx, fixtures.PrivateService("payments", name, map[string]string{request.AnnotationPool: "dc-link"}))
			calls := s.WebhookCalls(from)
			age, ok := two.Gauge("scw_lb_ipam_index_age_seconds", "pool", "dc-link")
			restore()
			if err != nil {
				t.Fatal(err)
			}
			now := get(t, "payments", name)
			t.Cleanup(func() {
				// Deleted before the CCM attached it (X is freed once the
				// previous Load Balancer is gone), the CCM would ask the
				// Load Balancer's status first and retry that for ever
				// (docs/troubleshooting.md); a user deletes it later too.
				if got := now.Annotations[ccm.AnnotationPrivateIPIDs]; got != "" {
					attachedTo(t, "payments", name, got)
				}
				del(t, now)
			})
			if !ok || listedSince(two, booked) {
				t.Logf("attempt %d: replica 1 listed the pool after the booking (index age %.1fs); again", attempt, age)
				continue
			}
			if one.Creates() != created1+1 || two.Creates() != created2+1 {
				t.Fatalf("CREATEs answered: replica 0 %v, replica 1 %v; want one each", one.Creates()-created1, two.Creates()-created2)
			}
			t.Logf("re-created through replica 1 in %s after the booking (its cache showed it after %s); its index was %.1fs old",
				time.Since(booked).Round(time.Millisecond), seen.Round(time.Millisecond), age)
			if got := now.Annotations[ccm.AnnotationPrivateIPIDs]; got != x {
				t.Fatalf("re-created through replica 1: got %s, want %s back (calls %v)", got, x, calls)
			}
			// The sweeper (every second, on either replica) lists and reads
			// too: only "no booking, a re-read" is the admission's own.
			if calls[emulator.OpBookIP] != 0 || calls[emulator.OpGetIP] == 0 {
				t.Fatalf("the re-create's calls: %v, want a re-read and no booking", calls)
			}
			return
		}
		t.Fatal("replica 1 listed the pool between the booking and the re-create three times in a row")
	})
}
