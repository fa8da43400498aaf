package webhook

import (
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// TestCreateEventsWaitForTheService: a CREATE's Events are recorded once
// the Service exists, on it (its UID: `kubectl describe` selects Events by
// UID), never on an older incarnation still being deleted, and never for a
// create that does not happen.
func TestCreateEventsWaitForTheService(t *testing.T) {
	h := newHarness(t)
	svc := fixtures.PrivateService("payments", "api", map[string]string{request.AnnotationPool: "dc-link"})
	admittedAt := time.Now()
	r, _, err := h.sendRaw(review(admissionv1.Create, svc, nil, false))
	if err != nil || r == nil || !r.Allowed {
		t.Fatalf("admission: %v %+v", err, r)
	}
	if ev := h.events.take(); len(ev) != 0 {
		t.Fatalf("Events before the Service exists (no UID to show them by): %v", ev)
	}
	stored := fixtures.Patched(t, svc, r.Patch)

	older := stored.DeepCopy()
	older.UID, older.CreationTimestamp = "uid-older", metav1.NewTime(admittedAt.Add(-time.Hour))
	h.mutator.seen(older)
	terminating := stored.DeepCopy()
	terminating.UID, terminating.CreationTimestamp = "uid-terminating", metav1.NewTime(admittedAt)
	terminating.DeletionTimestamp = &metav1.Time{Time: admittedAt}
	h.mutator.seen(terminating)
	if ev := h.events.take(); len(ev) != 0 {
		t.Fatalf("Events recorded on an older incarnation: %v", ev)
	}

	stored.UID, stored.CreationTimestamp = "uid-api", metav1.NewTime(admittedAt.Truncate(time.Second))
	h.events.mu.Lock()
	h.events.uids = nil
	h.events.mu.Unlock()
	h.mutator.seen(stored)
	h.events.mu.Lock()
	uids := slices.Clone(h.events.uids)
	h.events.mu.Unlock()
	if ev := h.events.take(); !slices.Equal(ev, []string{"Normal IPReserved payments/api"}) || !slices.Equal(uids, []types.UID{"uid-api"}) {
		t.Fatalf("Events %v on %v, want one IPReserved on uid-api", ev, uids)
	}
	h.mutator.seen(stored)
	if ev := h.events.take(); len(ev) != 0 {
		t.Fatalf("Events recorded twice: %v", ev)
	}
}

// TestHeldEventsExpire: the Events of a create that never shows its
// Service are forgotten after heldEventsTTL.
func TestHeldEventsExpire(t *testing.T) {
	var h heldEvents
	t0 := time.Now()
	gone := types.NamespacedName{Namespace: "payments", Name: "gone"}
	h.hold(gone, heldEvent{at: t0, reason: EventIPReserved})
	h.hold(types.NamespacedName{Namespace: "payments", Name: "api"}, heldEvent{at: t0.Add(heldEventsTTL + time.Second), reason: EventIPReserved})
	if _, ok := h.byKey[gone]; ok || len(h.byKey) != 1 {
		t.Fatalf("held %v, want only payments/api", h.byKey)
	}
}
