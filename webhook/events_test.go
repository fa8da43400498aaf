package webhook

import (
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
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
	h.mutator.seen(servicecache.NewRecord(older))
	terminating := stored.DeepCopy()
	terminating.UID, terminating.CreationTimestamp = "uid-terminating", metav1.NewTime(admittedAt)
	terminating.DeletionTimestamp = &metav1.Time{Time: admittedAt}
	h.mutator.seen(servicecache.NewRecord(terminating))
	if ev := h.events.take(); len(ev) != 0 {
		t.Fatalf("Events recorded on an older incarnation: %v", ev)
	}

	stored.UID, stored.CreationTimestamp = "uid-api", metav1.NewTime(admittedAt.Truncate(time.Second))
	h.events.mu.Lock()
	h.events.uids = nil
	h.events.mu.Unlock()
	h.mutator.seen(servicecache.NewRecord(stored))
	h.events.mu.Lock()
	uids := slices.Clone(h.events.uids)
	h.events.mu.Unlock()
	if ev := h.events.take(); !slices.Equal(ev, []string{"Normal IPReserved payments/api"}) || !slices.Equal(uids, []types.UID{"uid-api"}) {
		t.Fatalf("Events %v on %v, want one IPReserved on uid-api", ev, uids)
	}
	h.mutator.seen(servicecache.NewRecord(stored))
	if ev := h.events.take(); len(ev) != 0 {
		t.Fatalf("Events recorded twice: %v", ev)
	}
}

// TestHeldEventsAreAboutTheService: what a replica holds is recorded only
// on the Service it is about, and never grows past one admission per name.
func TestHeldEventsAreAboutTheService(t *testing.T) {
	t0 := time.Now()
	key := types.NamespacedName{Namespace: "payments", Name: "api"}
	svc := func(created time.Time, ids string) *servicecache.Record {
		s := fixtures.PrivateService("payments", "api", map[string]string{ccm.AnnotationPrivateIPIDs: ids})
		s.UID, s.CreationTimestamp = "uid-api", metav1.NewTime(created)
		return servicecache.NewRecord(s)
	}
	reserved := func(id string) []heldEvent { return []heldEvent{{id: id, reason: EventIPReserved}} }
	reasons := func(es []heldEvent) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.reason+" "+e.id)
		}
		return out
	}
	t.Run("a create refused after the webhook: not recorded on a later namesake", func(t *testing.T) {
		var h heldEvents
		h.hold(key, t0, reserved("id-a"))
		later := t0.Add(3 * time.Hour)
		if got := h.take(svc(later, "id-a"), later); len(got) != 0 {
			t.Fatalf("recorded %v hours after its admission", reasons(got))
		}
	})
	t.Run("a retried create: only the latest admission, only the IDs the Service holds", func(t *testing.T) {
		var h heldEvents
		for i := range 2880 { // a day of retries every 30 s
			h.hold(key, t0.Add(time.Duration(i)*30*time.Second), reserved("id-old"))
		}
		end := t0.Add(2880 * 30 * time.Second)
		h.hold(key, end, []heldEvent{{id: "id-b", reason: EventIPReused}})
		if n := len(h.byKey[key].events); n != 1 || len(h.byKey) != 1 {
			t.Fatalf("held %d Events for %d names, want the latest admission's one", n, len(h.byKey))
		}
		if got := h.take(svc(end, "id-b"), end); !slices.Equal(reasons(got), []string{"IPReused id-b"}) {
			t.Fatalf("recorded %v", reasons(got))
		}
		h.hold(key, end, reserved("id-c"))
		if got := h.take(svc(end, "id-d"), end); len(got) != 0 {
			t.Fatalf("recorded %v on a Service that holds id-d", reasons(got))
		}
	})
	t.Run("the apiserver's clock a few seconds behind", func(t *testing.T) {
		var h heldEvents
		h.hold(key, t0, reserved("id-a"))
		if got := h.take(svc(t0.Add(-5*time.Second).Truncate(time.Second), "id-a"), t0); !slices.Equal(reasons(got), []string{"IPReserved id-a"}) {
			t.Fatalf("recorded %v", reasons(got))
		}
	})
	t.Run("forgotten after heldEventsTTL", func(t *testing.T) {
		var h heldEvents
		gone := types.NamespacedName{Namespace: "payments", Name: "gone"}
		h.hold(gone, t0, reserved("id-a"))
		h.hold(key, t0.Add(heldEventsTTL+time.Second), reserved("id-b"))
		if _, ok := h.byKey[gone]; ok || len(h.byKey) != 1 {
			t.Fatalf("held %v, want only payments/api", h.byKey)
		}
	})
}
