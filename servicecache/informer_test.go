package servicecache

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
)

// TestServiceInformerHoldsRecords: client-go's informer stores what its
// transform returns, keys it through meta.Accessor (the Record's
// GetObjectMeta), indexes it, hands it to event handlers, and Records
// answers from it.
func TestServiceInformerHoldsRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := servedService(), servedService()
	b.Name, b.UID = "web", "u-web"
	b.Annotations = map[string]string{ccm.AnnotationPrivateIPIDs: "id-b1, id-b2"}
	now := metav1.Now()
	c := servedService()
	c.Name, c.DeletionTimestamp = "gone", &now
	cs := fake.NewClientset(a, b, c)
	inf, err := newInformer(cs.CoreV1(), cs)
	if err != nil {
		t.Fatal(err)
	}
	records := inf.Records()
	if _, err := records.ReferencedBy(ctx, "id-b1"); err == nil {
		t.Fatal("an answer before the first listing")
	}
	updates := make(chan [2]any, 10)
	if err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) { updates <- [2]any{o, n} }}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = inf.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	obj, ok, err := inf.Store().GetByKey("payments/web")
	if r, isRecord := obj.(*Record); err != nil || !ok || !isRecord || r.UID != "u-web" || !r.Live() {
		t.Fatalf("stored %T %+v (%v %v)", obj, obj, ok, err)
	}
	if got, err := records.ReferencedBy(ctx, "id-b2"); err != nil || !slices.Equal(got, []types.NamespacedName{{Namespace: "payments", Name: "web"}}) {
		t.Fatalf("ReferencedBy: %v %v", got, err)
	}
	// The Terminating Service holds the same IDs as the served one: only
	// the live one references them, yet both exist.
	if got, _ := records.ReferencedBy(ctx, c.Annotations[ccm.AnnotationPrivateIPIDs]); !slices.Equal(got, []types.NamespacedName{{Namespace: "payments", Name: "api"}}) {
		t.Fatalf("the live one only: %v", got)
	}
	for _, name := range []string{"api", "web", "gone"} {
		if ok, err := records.Exists(ctx, types.NamespacedName{Namespace: "payments", Name: name}); !ok || err != nil {
			t.Errorf("%s: exists %v %v", name, ok, err)
		}
	}
	if ok, err := records.Exists(ctx, types.NamespacedName{Namespace: "payments", Name: "nope"}); ok || err != nil {
		t.Errorf("a Service that never was: exists %v %v", ok, err)
	}
	b2 := b.DeepCopy()
	b2.ResourceVersion = "2"
	b2.Annotations[ccm.AnnotationPrivateIPIDs] = "id-b3"
	if _, err := cs.CoreV1().Services("payments").Update(ctx, b2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-updates:
		o, n := u[0].(*Record), u[1].(*Record)
		if o.Annotation(ccm.AnnotationPrivateIPIDs) != "id-b1, id-b2" || n.Annotation(ccm.AnnotationPrivateIPIDs) != "id-b3" {
			t.Fatalf("update %+v -> %+v", o, n)
		}
	case <-ctx.Done():
		t.Fatal("no update")
	}
	if got, _ := records.ReferencedBy(ctx, "id-b3"); len(got) != 1 {
		t.Fatalf("reindexed: %d", len(got))
	}
	if got, _ := records.ReferencedBy(ctx, "id-b1"); len(got) != 0 {
		t.Fatalf("the old IDs still indexed: %v", got)
	}
}
