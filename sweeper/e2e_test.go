package sweeper

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// admit runs a CREATE through the real mutator and stores the mutated
// Service, as the apiserver would.
func (w *world) admit(m *webhook.ServiceMutator, ns, name string, ann map[string]string) (*corev1.Service, admission.Response) {
	w.T.Helper()
	stored, resp := w.try(m, ns, name, ann, false)
	if !resp.Allowed {
		w.T.Fatalf("denied: %s", resp.Result.Message)
	}
	return stored, resp
}

// try is admit that may be denied, or a dry run: then nothing is stored.
func (w *world) try(m *webhook.ServiceMutator, ns, name string, ann map[string]string, dryRun bool) (*corev1.Service, admission.Response) {
	w.T.Helper()
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	raw, _ := json.Marshal(svc)
	resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"}, Namespace: ns, Name: name,
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}, DryRun: &dryRun,
	}})
	if !resp.Allowed || dryRun {
		return nil, resp
	}
	stored := svc.DeepCopy()
	if stored.Annotations == nil {
		stored.Annotations = map[string]string{}
	}
	for _, op := range resp.Patches {
		if op.Operation == "add" || op.Operation == "replace" {
			if v, ok := op.Value.(string); ok {
				stored.Annotations[unescape(op.Path)] = v
			}
		}
	}
	stored.UID = types.UID("uid-" + name + "-" + w.Clock.Now().Format(time.RFC3339))
	if err := w.Kube.Create(context.Background(), stored); err != nil {
		w.T.Fatal(err)
	}
	return stored, resp
}

func unescape(path string) string {
	const prefix = "/metadata/annotations/"
	key := path[len(prefix):]
	out := []rune{}
	for i := 0; i < len(key); i++ {
		if key[i] == '~' && i+1 < len(key) {
			if key[i+1] == '1' {
				out = append(out, '/')
			} else {
				out = append(out, '~')
			}
			i++
			continue
		}
		out = append(out, rune(key[i]))
	}
	return string(out)
}

// TestRecreatedWithinRetentionGetsTheSameIP goes across the webhook and the
// sweeper: delete, orphaned, re-create, same IP, tag cleared, never released.
func TestRecreatedWithinRetentionGetsTheSameIP(t *testing.T) {
	w := newWorld(t)
	alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, References: fixtures.Records(w.Kube), Clock: w.Clock, Claims: allocator.NoClaims{}}))
	m := &webhook.ServiceMutator{Allocator: alloc, Namespaces: w.Kube, Log: logr.Discard()}
	s := w.sweeper()

	first, _ := w.admit(m, "payments", "api", map[string]string{request.AnnotationPool: "dc-link"})
	id := first.Annotations[ccm.AnnotationPrivateIPIDs]
	if id == "" {
		t.Fatalf("no IP: %v", first.Annotations)
	}
	w.sweep(s)
	w.Remove(first)
	w.sweep(s)
	if w.Entry(id).OrphanedSince.IsZero() {
		t.Fatal("not orphaned after delete")
	}
	w.Clock.Step(12 * time.Hour) // within the 24h retention

	again, resp := w.admit(m, "payments", "api", map[string]string{request.AnnotationPool: "dc-link"})
	if got := again.Annotations[ccm.AnnotationPrivateIPIDs]; got != id {
		t.Fatalf("re-created Service got %s, want %s back", got, id)
	}
	if len(resp.Warnings) == 0 || resp.Warnings[0][:len("scw-lb-ipam: reused")] != "scw-lb-ipam: reused" {
		t.Fatalf("warnings %q", resp.Warnings)
	}
	if !w.Entry(id).OrphanedSince.IsZero() {
		t.Fatal("orphaned-since still set after reuse")
	}
	w.Clock.Step(48 * time.Hour)
	w.sweep(s)
	if !w.Exists(id) {
		t.Fatal("released the IP of the re-created Service")
	}
	if e := w.Entry(id); e.UID != string(again.UID) {
		t.Fatalf("uid %q not moved to the new Service %q", e.UID, again.UID)
	}
}

func TestStartRunsPeriodicallyAndOnTrigger(t *testing.T) {
	w := newWorld(t)
	r := w.book("general", "payments", "api")
	svc := w.Live("payments", "api", r.ID)
	s := w.sweeper(func(o *Options) { o.Interval = time.Hour; o.Debounce = 5 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, func() bool { return w.Entry(r.ID).UID != "" }, "the first cycle at start")

	w.Remove(svc)
	s.Handler().OnDelete(servicecache.NewRecord(svc))
	// The trigger waits out the debounce on the fake clock, far short of
	// the hourly tick.
	waitFor(t, func() bool {
		w.Clock.Step(time.Second)
		return !w.Entry(r.ID).OrphanedSince.IsZero()
	}, "a cycle after the deletion")
	if elapsed := w.Clock.Since(fixtures.Epoch); elapsed >= time.Hour {
		t.Fatalf("the cycle came from the periodic tick (%s), not the trigger", elapsed)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	fixtures.Eventually(t, 10*time.Second, 5*time.Millisecond, what, cond)
}

// TestRecreateUnseenByTheIndex: replica B listed its pools before replica
// A booked the Service's IP, and its Service cache never showed it (the
// Service came and went between two of B's listings). The re-create on B
// gets a fresh IP; nothing references the old one, and the sweeper
// releases it after the retention: stickiness lost, nothing leaked.
func TestRecreateUnseenByTheIndex(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	p, _ := w.Cfg.Pool("dc-link")
	replica := func() *allocator.Allocator {
		return fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, References: fixtures.Records(w.Kube), Clock: w.Clock, Claims: allocator.NoClaims{}}))
	}
	a, b := replica(), replica()
	if err := b.Inventory().Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	api := types.NamespacedName{Namespace: "payments", Name: "api"}
	old, err := a.Reserve(ctx, ipam.Request{Pool: p, Service: api})
	if err != nil {
		t.Fatal(err)
	}
	first := w.Live("payments", "api", old.ID)
	w.sweep(w.sweeper())
	w.Remove(first)

	again, err := b.Reserve(ctx, ipam.Request{Pool: p, Service: api})
	if err != nil || again.ID == old.ID || !again.Booked {
		t.Fatalf("re-create on the replica that has not seen it: %+v %v", again, err)
	}
	w.Live("payments", "api", again.ID)
	w.sweep(w.sweeper())
	if w.Entry(old.ID).OrphanedSince.IsZero() {
		t.Fatal("the old reservation is not marked orphaned")
	}
	w.Clock.Step(p.Retention.Duration + time.Minute)
	rep := w.sweep(w.sweeper())
	if !slices.Contains(rep.Released, old.ID) || w.Exists(old.ID) || !w.Exists(again.ID) {
		t.Fatalf("released %v; old exists %v, new exists %v", rep.Released, w.Exists(old.ID), w.Exists(again.ID))
	}
}

// TestDeletedBeforeTheBackfillIsTakenBackAtOnce: a Service is deleted
// before the sweeper back-filled its uid, and a cycle marks its IP orphaned
// before the re-create (helm uninstall && helm install). Without a uid the
// reservation counts as pending: the re-create may take it back during the
// pending grace, down to the shortest grace the options accept.
func TestDeletedBeforeTheBackfillIsTakenBackAtOnce(t *testing.T) {
	w := newWorld(t)
	const margin = 20 * time.Second
	policy := ipam.Retention{PendingGrace: margin + time.Second, Margin: margin}
	if err := policy.Check(w.Cfg); err != nil {
		t.Fatal(err)
	}
	alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: w.Cloud, Config: w.Cfg, References: fixtures.Records(w.Kube), Clock: w.Clock, Retention: policy, Claims: allocator.NoClaims{}}))
	m := &webhook.ServiceMutator{Allocator: alloc, Namespaces: w.Kube, Log: logr.Discard()}
	s := w.sweeper(func(o *Options) { o.PendingGrace = policy.PendingGrace })

	first, _ := w.admit(m, "payments", "api", map[string]string{request.AnnotationPool: "dc-link"})
	id := first.Annotations[ccm.AnnotationPrivateIPIDs]
	w.Remove(first)
	w.sweep(s)
	if e := w.Entry(id); e.OrphanedSince.IsZero() || e.UID != "" {
		t.Fatalf("want a pending reservation marked orphaned, got %+v", e)
	}
	w.Clock.Step(500 * time.Millisecond)
	again, _ := w.admit(m, "payments", "api", map[string]string{request.AnnotationPool: "dc-link"})
	if got := again.Annotations[ccm.AnnotationPrivateIPIDs]; got != id {
		t.Fatalf("re-created at once got %s, want %s back", got, id)
	}
}
