package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
)

// BenchmarkReserve is one admission's Reserve in a pool that picks its
// addresses, through the emulator, while the Inventory's background refresh
// lists the subnet over and over (every 10ms instead of every minute: what
// an admission may wait for or compete with outside its BookIP shows up
// at once). The subnet holds 4,000 addresses of others. Run it with
// -mutexprofile and -blockprofile to see where admissions wait.
func BenchmarkReserve(b *testing.B) {
	e := newEnv(b, "dc=10.64.0.0/18")
	cfg := e.Config(b, poolFile(`  - {name: ranged, privateNetworkID: "{{dc}}", ranges: ["10.64.16.0-10.64.63.200"]}`))
	addr := netip.MustParseAddr("10.64.0.10")
	for range 4000 {
		if _, err := e.Srv.AddIP(e.PNs["dc"].ID, addr, nil, nil); err != nil {
			b.Fatal(err)
		}
		addr = addr.Next()
	}
	inv := inventory.New(inventory.Options{Cloud: e.Cloud, Config: cfg, RefreshInterval: 10 * time.Millisecond})
	a := newAllocator(Options{Inventory: inv, Cloud: e.Cloud})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	for !inv.Listed() {
		time.Sleep(time.Millisecond)
	}
	p, _ := cfg.Pool("ranged")
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: svc("bench", fmt.Sprint("s", n.Add(1)))}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
}
