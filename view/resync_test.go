package view

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apiserver holds the view's objects as the apiserver would, and counts
// the writes: only what a Mirror calls is implemented (the embedded nil
// Client panics on anything else). Its methods lock mu: a Mirror writes
// from several workers at once, as it does to a real apiserver.
type apiserver struct {
	client.Client
	mu      sync.Mutex
	objects map[objectKey]map[string]any
	writes  int
}

func (a *apiserver) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ul := list.(*unstructured.UnstructuredList)
	kind := strings.TrimSuffix(ul.GetKind(), "List")
	for k, st := range a.objects {
		if k.kind == kind {
			u := unstructured.Unstructured{Object: map[string]any{"status": runtime.DeepCopyJSON(st)}}
			u.SetGroupVersionKind(k.gvk())
			u.SetNamespace(k.namespace)
			u.SetName(k.name)
			ul.Items = append(ul.Items, u)
		}
	}
	return nil
}

func (a *apiserver) Apply(_ context.Context, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
	u := obj.(interface {
		UnstructuredContent() map[string]any
		GetKind() string
		GetNamespace() string
		GetName() string
	})
	st, _, _ := unstructured.NestedMap(u.UnstructuredContent(), "status")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.objects[objectKey{u.GetKind(), u.GetNamespace(), u.GetName()}] = runtime.DeepCopyJSON(st)
	a.writes++
	return nil
}

func (a *apiserver) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	u := obj.(*unstructured.Unstructured)
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.objects, objectKey{u.GetKind(), u.GetNamespace(), u.GetName()})
	a.writes++
	return nil
}

// TestMirrorWritesWhatDiffers: a first Publish writes each object, the
// next nothing; an object someone else deleted is written again at the
// next read-back (Resync), not before; a reservation gone from the
// snapshot is deleted; a new leader's Mirror writes nothing over an
// unchanged view.
func TestMirrorWritesWhatDiffers(t *testing.T) {
	ctx := context.Background()
	api := &apiserver{objects: map[objectKey]map[string]any{}}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	m := NewMirror(Options{Client: api, Reader: api, Clock: clk, Log: logr.Discard()})
	snap := &Snapshot{Reservations: []Reservation{
		{ID: "a", Namespace: "web", Status: ReservationStatus{Address: "172.16.35.1", Pool: "dc-link", Service: "api", State: StateLive}},
		{ID: "b", Namespace: "web", Status: ReservationStatus{Address: "172.16.35.2", Pool: "dc-link", Service: "old", State: StateRetained}},
	}}
	publish := func(what string, want int) {
		t.Helper()
		before := api.writes
		w, err := m.Publish(ctx, snap)
		if err != nil || w.Errors > 0 {
			t.Fatalf("%s: %v (%d failed)", what, err, w.Errors)
		}
		if got := api.writes - before; got != want || w.Total() != want {
			t.Fatalf("%s: %d writes (counted %d), want %d", what, got, w.Total(), want)
		}
	}
	publish("first sync", 2)
	publish("idle cycle", 0)
	delete(api.objects, objectKey{ReservationKind.Kind, "web", "b"})
	clk.SetTime(clk.Now().Add(DefaultResync - time.Second))
	publish("before the read-back", 0)
	clk.SetTime(clk.Now().Add(time.Second))
	publish("at the read-back", 1)
	if _, ok := api.objects[objectKey{ReservationKind.Kind, "web", "b"}]; !ok {
		t.Fatal("the object deleted behind the Mirror's back was not written again")
	}
	snap.Reservations = snap.Reservations[:1]
	publish("one released", 1)
	m = NewMirror(Options{Client: api, Reader: api, Clock: clk, Log: logr.Discard()})
	publish("a new leader", 0)
}
