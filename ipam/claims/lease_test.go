package claims

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// The dangerous order of finding 4: the sweeper's collection reads a claim
// that looks stale (its Service was deleted a while ago), the re-created
// Service's admission claims the ID again, then the collection deletes.
// The renewal must make that delete lose on its resourceVersion, or the
// re-created Service runs without its claim and a second Service could
// take the ID (invariant 1).
func TestCollectLosesToARenewalBetweenItsReadAndItsDelete(t *testing.T) {
	kube, clock, claims := newLeases()
	ctx := context.Background()
	const id = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"
	api := types.NamespacedName{Namespace: "web", Name: "api"}
	if err := claims.Claim(ctx, id, api); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Minute) // the claim is no longer fresh

	n, claimed, err := claims.Collect(ctx, func(gotID string, holder types.NamespacedName) bool {
		if gotID != id || holder != api {
			t.Fatalf("asked about %s of %s", gotID, holder)
		}
		// Between the collection's read and its delete: the re-create.
		if err := claims.Claim(ctx, id, api); err != nil {
			t.Fatalf("the re-create's claim: %v", err)
		}
		return false // the sweeper's view predates the re-create
	})
	if err != nil || n != 0 || len(claimed) != 1 || claimed[0] != id {
		t.Fatalf("Collect = %d, %v, %v; want nothing collected and %s still claimed", n, claimed, err, id)
	}
	lease := &coordinationv1.Lease{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "scw-lb-ipam", Name: claimName(id)}, lease); err != nil {
		t.Fatalf("the re-created Service lost its claim: %v", err)
	}
	if got := *lease.Spec.HolderIdentity; got != api.String() {
		t.Fatalf("claim held by %s, want %s", got, api)
	}
	if !lease.Spec.AcquireTime.Time.Equal(clock.Now()) {
		t.Fatalf("claim acquired at %s, want renewed at %s", lease.Spec.AcquireTime.Time, clock.Now())
	}
}

// A claim younger than Fresh is neither asked about nor collected, but it
// is reported claimed: its Service may not be in the sweeper's cache yet,
// and the convergence monitor must not take its ID, which our listing never
// holds, for one of our reservations gone from IPAM.
func TestCollectReportsFreshClaimsAsClaimed(t *testing.T) {
	_, clock, claims := newLeases()
	ctx := context.Background()
	const fresh, stale = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f", "0b9e2c61-3d4f-4a5b-9c6d-7e8f9a0b1c2d"
	if err := claims.Claim(ctx, stale, types.NamespacedName{Namespace: "web", Name: "old"}); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Minute)
	if err := claims.Claim(ctx, fresh, types.NamespacedName{Namespace: "web", Name: "new"}); err != nil {
		t.Fatal(err)
	}
	var asked []string
	n, claimed, err := claims.Collect(ctx, func(id string, _ types.NamespacedName) bool {
		asked = append(asked, id)
		return false
	})
	if err != nil || n != 1 || len(asked) != 1 || asked[0] != stale {
		t.Fatalf("Collect = %d, %v; asked about %v, want %s only, collected", n, err, asked, stale)
	}
	if len(claimed) != 1 || claimed[0] != fresh {
		t.Fatalf("claimed %v, want the fresh claim %s only", claimed, fresh)
	}
}

// newLeases are claims on a fake apiserver and a fake clock, fresh for 20 s.
func newLeases() (client.Client, *clocktesting.FakeClock, *Leases) {
	kube := fixtures.FakeKube().Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	return kube, clock, &Leases{Client: kube, Reader: kube, Namespace: "scw-lb-ipam", Fresh: 20 * time.Second, Clock: clock}
}

var _ allocator.Claims = (*Leases)(nil)
