package webhook

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// heldEventsTTL bounds how long the Events of an admitted CREATE wait for
// their Service: a create that another admission plugin or etcd refused
// after this webhook answered never shows one.
const heldEventsTTL = time.Minute

// creationSlack allows for the apiserver's whole-second creation
// timestamps and a small clock skew between it and this replica.
const creationSlack = 2 * time.Second

// heldEvents keeps the Events of admitted CREATEs until the Service exists.
// At a CREATE admission the Service has no UID yet: an Event about it would
// carry none, and `kubectl describe` selects a Service's Events by UID, so
// it would never show them; and a create refused after this webhook
// answered would leave an Event about a Service that never existed. The
// replica that admitted records them when its Service informer sees the
// Service (seen), with the Service's UID, which also keeps the Event's
// write out of the create it describes.
type heldEvents struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName][]heldEvent
}

type heldEvent struct {
	at                        time.Time
	eventtype, reason, action string
	note                      string
}

// hold keeps e for the Service key, and forgets what waited past
// heldEventsTTL.
func (h *heldEvents) hold(key types.NamespacedName, e heldEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byKey == nil {
		h.byKey = map[types.NamespacedName][]heldEvent{}
	}
	for k, es := range h.byKey {
		if e.at.Sub(es[len(es)-1].at) > heldEventsTTL {
			delete(h.byKey, k)
		}
	}
	h.byKey[key] = append(h.byKey[key], e)
}

// take returns the Events held for svc when it is the Service they were
// held for: not being deleted, and created no earlier than they were
// admitted (an older incarnation of the same name is still being deleted).
func (h *heldEvents) take(svc *corev1.Service) []heldEvent {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	h.mu.Lock()
	defer h.mu.Unlock()
	es := h.byKey[key]
	if len(es) == 0 || svc.UID == "" || svc.DeletionTimestamp != nil || svc.CreationTimestamp.Time.Before(es[0].at.Add(-creationSlack)) {
		return nil
	}
	delete(h.byKey, key)
	return es
}

// seen records the Events held for svc, now that it exists (the Service
// informer's handler calls it).
func (m *ServiceMutator) seen(svc *corev1.Service) {
	if m.Recorder == nil {
		return
	}
	for _, e := range m.held.take(svc) {
		m.Recorder.Eventf(svc, nil, e.eventtype, e.reason, e.action, "%s", e.note)
	}
}
