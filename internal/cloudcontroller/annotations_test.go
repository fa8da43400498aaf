package cloudcontroller

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestListAnnotationsAreReadAsTheCCMReadsThem: pn-ids and private-ip-ids
// are split on commas and nothing more, as the CCM's getPrivateNetworkIDs
// does. A padded, zonal or empty item is not cleaned up: the sync that
// names it fails (logged, retried) and the reserved IP stays unattached,
// where a forgiving reading would have attached it and hidden the
// difference from the CCM.
func TestListAnnotationsAreReadAsTheCCMReadsThem(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pnIDs, ipID func(w *world, x string) string
		attached    bool
		// partial: the other networks' attaches may run before the failing
		// one (map order, as the CCM's), the reserved IP's included.
		partial bool
	}{{
		name:     "canonical",
		pnIDs:    func(w *world, _ string) string { return w.nodes.ID + "," + w.pool.ID },
		ipID:     func(_ *world, x string) string { return x },
		attached: true,
	}, {
		name:  "padded network",
		pnIDs: func(w *world, _ string) string { return w.nodes.ID + ", " + w.pool.ID },
		ipID:  func(_ *world, x string) string { return x },
	}, {
		name:  "zonal network",
		pnIDs: func(w *world, _ string) string { return w.nodes.ID + ",fr-par-1/" + w.pool.ID },
		ipID:  func(_ *world, x string) string { return x },
	}, {
		name:    "empty network item",
		pnIDs:   func(w *world, _ string) string { return w.nodes.ID + "," + w.pool.ID + "," },
		ipID:    func(_ *world, x string) string { return x },
		partial: true,
	}, {
		name:  "padded IP ID",
		pnIDs: func(w *world, _ string) string { return w.nodes.ID + "," + w.pool.ID },
		ipID:  func(_ *world, x string) string { return " " + x },
	}, {
		name:  "empty IP ID item",
		pnIDs: func(w *world, _ string) string { return w.nodes.ID + "," + w.pool.ID },
		ipID:  func(_ *world, x string) string { return x + "," },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			var mu sync.Mutex
			var failures []string
			w.ccm.o.Logf = func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				if strings.Contains(format, "ensuring the Load Balancer") {
					failures = append(failures, format)
				}
			}
			ctx := context.Background()
			x, err := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.10"), []string{"scw-lb-ipam"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			svc := w.reservedLB("api", "uid-1", x)
			svc.Annotations[annotationPNIDs] = tc.pnIDs(w, x)
			svc.Annotations[annotationPrivateIPIDs] = tc.ipID(w, x)
			if err := w.kube.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
			w.ccm.Sync(ctx)
			ip, _ := w.emu.IP(x)
			if got := ip.Resource != nil; got != tc.attached && !tc.partial {
				t.Fatalf("reserved IP attached: %v, want %v (resource %+v)", got, tc.attached, ip.Resource)
			}
			mu.Lock()
			defer mu.Unlock()
			if failed := len(failures) > 0; failed == tc.attached {
				t.Fatalf("sync failures %q, want a failure: %v", failures, !tc.attached)
			}
			if _, retrying := w.ccm.retries["uid-1"]; retrying == tc.attached {
				t.Fatalf("retry pending: %v, want %v", retrying, !tc.attached)
			}
		})
	}
}

// Finding 1 of the re-apply: pn-ids reset to the user's networks while
// private-ip-ids still names an IP on the pool's network. The CCM detaches
// the network pn-ids no longer names, with the reserved IP on it, and only
// then fails on the ID it cannot place: the stand-in must cost the address
// the same way, or a suite could not see the bug.
func TestPNIDsWithoutThePoolsNetworkDetachesItBeforeFailing(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	x, err := w.emu.AddIP(w.pool.ID, netip.MustParseAddr("172.16.35.11"), []string{"scw-lb-ipam"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := w.reservedLB("api", "uid-1", x)
	svc.Annotations[annotationPNIDs] = w.nodes.ID + "," + w.pool.ID
	svc.Annotations[annotationPrivateIPIDs] = x
	if err := w.kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	if ip, _ := w.emu.IP(x); ip.Resource == nil {
		t.Fatal("the reserved IP was not attached at first")
	}
	if err := w.kube.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	svc.Annotations[annotationPNIDs] = w.nodes.ID // a re-apply of the manifest
	if err := w.kube.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	w.ccm.Sync(ctx)
	if ip, _ := w.emu.IP(x); ip.Resource != nil {
		t.Fatalf("the reserved IP is still attached to %+v: the stand-in is more forgiving than the CCM", ip.Resource)
	}
	if _, retrying := w.ccm.retries["uid-1"]; !retrying {
		t.Fatal("the sync did not fail")
	}
}
