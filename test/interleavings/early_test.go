package interleavings

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// tiny is a pool of two addresses.
const tiny = "  - {name: tiny, privateNetworkID: {{dc}}, ranges: [172.16.35.251-172.16.35.252], retention: 24h}\n"

// TestEarlyReleaseEveryInterleaving drives the release brought forward by
// a full pool against a re-create taking the reservation back and the
// sweeper releasing it. Pool tiny has two addresses: X, retained for the
// deleted payments/api an hour ago, and Y, live. At T, an admission for
// ci/new finds the pool full and brings X's release forward (marker: its
// re-read and its write) while payments/api is re-created (admission: its
// read and its take-back), in every order. A margin later, the sweeper
// (its re-read and release) meets the re-create's retry (its read and its
// booking), in every order, when the first attempt was refused. In every
// case no ID handed out is released and no live Service loses its IP
// (invariant 2); and the protocol is not vacuous: some orders take X back,
// others release it early and book the retry anew.
func TestEarlyReleaseEveryInterleaving(t *testing.T) {
	const margin = 20 * time.Second
	first := orders([]string{"marker:GetIP", "marker:SetTags"}, []string{"admission:ListIPs", "admission:SetTags"})
	if len(first) != 6 {
		t.Fatalf("%d interleavings, want 6", len(first))
	}
	var takenBack, releasedEarly int
	for _, o1 := range first {
		for _, o2 := range orders([]string{"sweeper:GetIP", "sweeper:ReleaseIP"}, []string{"retry:ListIPs", "retry:BookIP"}) {
			t.Run(strings.Join(o1, ",")+"/"+strings.Join(o2, ","), func(t *testing.T) {
				w := newWorld(t, tiny)
				api := types.NamespacedName{Namespace: "payments", Name: "api"}
				x := w.book("tiny", api.Namespace, api.Name)
				gone := w.Live(api.Namespace, api.Name, x.ID)
				y := w.book("tiny", "ci", "live")
				w.Live("ci", "live", y.ID)
				w.sweep(w.sweeper()) // uids back-filled
				w.Remove(gone)
				w.sweep(w.sweeper()) // X orphaned
				w.Clock.Step(time.Hour)
				p, _ := w.Cfg.Pool("tiny")
				alloc := func(s *schedule, party string) *allocator.Allocator {
					return fixtures.Must(allocator.New(allocator.Options{Cloud: bookingCloud{gatedCloud{Cloud: w.Cloud, party: party, s: s}}, Config: w.Cfg,
						References: fixtures.Records(w.Kube), Clock: w.Clock,
						Retention: ipam.Retention{PendingGrace: sweeper.DefaultPendingGrace, Margin: margin}, Claims: allocator.NoClaims{}}))
				}

				s1 := newSchedule(o1)
				var handed []string
				var res *ipam.Grant
				var merr, aerr error
				run(s1, map[string]func(){
					"marker": func() {
						_, merr = alloc(s1, "marker").Reserve(context.Background(), ipam.Request{Pool: p, Service: types.NamespacedName{Namespace: "ci", Name: "new"}})
					},
					"admission": func() {
						res, aerr = alloc(s1, "admission").Reserve(context.Background(), ipam.Request{Pool: p, Service: api})
					},
				})
				if ipam.ReasonOf(merr) != ipam.ReasonYielding {
					t.Fatalf("ci/new in the full pool: %v, want a retryable refusal", merr)
				}
				if aerr == nil {
					handed = append(handed, res.ID)
					w.Live(api.Namespace, api.Name, res.ID)
				} else if ipam.ReasonOf(aerr) != ipam.ReasonYielding {
					t.Fatalf("the re-create: %v", aerr)
				}

				w.Clock.Step(margin + time.Second)
				s2 := newSchedule(o2)
				var rep sweeper.Report
				var serr error
				parties := map[string]func(){
					"sweeper": func() {
						rep, serr = w.sweeper(func(o *sweeper.Options) { o.Cloud = gatedCloud{Cloud: w.Cloud, party: "sweeper", s: s2} }).Sweep(context.Background())
					},
				}
				if aerr == nil {
					s2.finish("retry") // nothing to retry: its steps are skipped
				} else {
					parties["retry"] = func() {
						res, aerr = alloc(s2, "retry").Reserve(context.Background(), ipam.Request{Pool: p, Service: api})
						if aerr == nil {
							handed = append(handed, res.ID)
						}
					}
				}
				run(s2, parties)
				if serr != nil {
					t.Fatal(serr)
				}
				for _, id := range append(handed, y.ID) {
					if !w.Exists(id) {
						t.Fatalf("invariant 2: %s was handed out (or is live) and is released; steps %v then %v", id, s1.made, s2.made)
					}
				}
				if len(handed) > 0 && handed[0] == x.ID {
					takenBack++
					if slices.Contains(rep.Released, x.ID) {
						t.Fatalf("X was taken back and released")
					}
				}
				if rep.EarlyReleased["tiny"] == 1 {
					releasedEarly++
					if aerr != nil && ipam.ReasonOf(aerr) != ipam.ReasonYielding {
						t.Fatalf("the retry after the early release: %v", aerr)
					}
				}
				if aerr == nil && res.Address != netip.MustParseAddr("172.16.35.251") && res.Address != netip.MustParseAddr("172.16.35.252") {
					t.Fatalf("handed out %s outside the pool", res.Address)
				}
			})
		}
	}
	if takenBack == 0 || releasedEarly == 0 {
		t.Fatalf("vacuous: X taken back in %d cases, released early in %d", takenBack, releasedEarly)
	}
	t.Logf("X taken back in %d cases, released early in %d (of 36)", takenBack, releasedEarly)
}
