package allocator

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestStartRefreshesOnItsClock: the background refresh lists the pools'
// subnets once at start, then every half OccupancyTTL of the allocator's
// clock, not of the wall clock.
func TestStartRefreshesOnItsClock(t *testing.T) {
	e := newEnv(t, "dc=172.16.32.0/22")
	cfg := e.Config(t, poolFile(`  - {name: ranged, privateNetworkID: "{{dc}}", ranges: ["172.16.35.200-172.16.35.203"]}`))
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC))
	a := newAllocator(Options{Cloud: e.Cloud, Config: cfg, Clock: clk, OccupancyTTL: time.Hour})
	e.Srv.ResetCounts()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.inv.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	fixtures.Eventually(t, 10*time.Second, 5*time.Millisecond, "the listing at start", func() bool { return e.Srv.Count(emulator.OpListIPs) == 1 && clk.HasWaiters() })
	time.Sleep(50 * time.Millisecond)
	if n := e.Srv.Count(emulator.OpListIPs); n != 1 {
		t.Fatalf("%d listings before the clock moved, want 1", n)
	}
	clk.Step(30 * time.Minute)
	fixtures.Eventually(t, 10*time.Second, 5*time.Millisecond, "the listing half a TTL later", func() bool { return e.Srv.Count(emulator.OpListIPs) == 2 })
	if st := a.inv.Stats(); len(st) != 1 || !st[0].Known || st[0].Total != 4 {
		t.Fatalf("stats %+v", st)
	}
}
