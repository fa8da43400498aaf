package allocator

import (
	"context"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// TestTakeBackReconcilesTheNamespaceTag: a Gateway's reservation tagged
// with its controller's namespace (booked before gatewayControllers named
// it, or back-filled from the Service tag) is taken back by the re-created
// Service judged by the Gateway's namespace: the same write tags it with
// that namespace, so it counts in that namespace's share from then on.
func TestTakeBackReconcilesTheNamespaceTag(t *testing.T) {
	e, a := allocEnv(t, refs{})
	ctx := context.Background()
	p := pool(t, a, "ranged")
	gw := svc("envoy-gateway-system", "envoy-team-a-web")
	first, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: gw, Namespace: "envoy-gateway-system"})
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := ipam.ParseEntry(mustIP(t, e, first.ID).Tags)
	entry.UID, entry.OrphanedSince = "uid-1", time.Now().Add(-time.Hour)
	entry.ReleaseAt = entry.OrphanedSince.Add(24 * time.Hour)
	if _, err := e.Cloud.SetTags(ctx, first.ID, entry.Tags()); err != nil {
		t.Fatal(err)
	}
	again, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: gw, Namespace: "team-a"})
	if err != nil || again.ID != first.ID || !again.Reused {
		t.Fatalf("re-create: %+v %v", again, err)
	}
	if got, _ := ipam.ParseEntry(mustIP(t, e, first.ID).Tags); got.JudgedNamespace() != "team-a" {
		t.Fatalf("namespace tag %q after the take-back, want team-a", got.JudgedNamespace())
	}
	// Live and tagged with the right namespace: a retry writes nothing.
	e.Srv.ResetCounts()
	if _, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: gw, Namespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if n := e.Srv.Count(emulator.OpUpdateIP); n != 0 {
		t.Fatalf("%d writes on a retry", n)
	}
}
