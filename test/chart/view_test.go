package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// TestViewReadOnly: with the chart's CRDs and policy installed, the
// release's ServiceAccount writes the view; a cluster admin's create,
// change or delete is refused, saying why; the namespace controller still
// deletes (a namespace being deleted must not hang on its
// IPReservations).
func TestViewReadOnly(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, namespace, nil)
	ensureNamespace(t, "view-tenant", nil)
	objs := render(t, []string{modes[0].values})
	for _, kind := range []string{"CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, o := range find(objs, kind) {
			if err := apply(ctx, o); err != nil {
				t.Fatalf("%s %s: %v", kind, o.GetName(), err)
			}
		}
	}
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(cluster)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		c, err := client.New(cfg, client.Options{Scheme: kube.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reservation := func(address string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"address": address, "service": "api", "state": view.StateLive}}}
		u.SetGroupVersionKind(view.ReservationKind)
		u.SetNamespace("view-tenant")
		u.SetName("00000000-0000-4000-8000-000000000001")
		return u
	}
	// The writer is the release's ServiceAccount, which its ClusterRole
	// lets write (impersonated with system:masters, the RBAC aside).
	writerCfg := rest.CopyConfig(cluster)
	writerCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + release, Groups: []string{"system:masters", "system:authenticated"}}
	writer, err := client.New(writerCfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The CRD is served and the policy in force a moment after they are
	// created.
	fixtures.Eventually(t, 30*time.Second, 200*time.Millisecond, "the release to create an IPReservation", func() bool {
		err := writer.Create(ctx, reservation("172.16.35.7"))
		return err == nil || apierrors.IsAlreadyExists(err)
	})
	fixtures.Eventually(t, 30*time.Second, 200*time.Millisecond, "the policy to refuse an admin's change", func() bool {
		u := reservation("10.0.0.1")
		err := kube.Patch(ctx, u, client.Merge)
		return err != nil && strings.Contains(err.Error(), "read-only view")
	})
	for what, err := range map[string]error{
		"create": kube.Create(ctx, func() *unstructured.Unstructured { u := reservation("10.0.0.2"); u.SetName("other"); return u }()),
		"delete": kube.Delete(ctx, reservation("")),
	} {
		if err == nil || !strings.Contains(err.Error(), "read-only view") || !strings.Contains(err.Error(), "through its Service") {
			t.Errorf("a cluster admin's %s: %v, want refused as a read-only view, saying where to change it", what, err)
		}
	}
	if err := as("system:serviceaccount:kube-system:namespace-controller").Delete(ctx, reservation("")); err != nil {
		t.Fatalf("the namespace controller deleting an IPReservation: %v", err)
	}

	// In a namespace being deleted, whoever deletes (a namespace
	// controller running under another name) gets through. No controller
	// runs here: the namespace stays Terminating.
	leaving := reservation("172.16.35.9")
	leaving.SetNamespace("view-leaving")
	ensureNamespace(t, "view-leaving", nil)
	if err := writer.Create(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "view-leaving"}}); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(ctx, leaving); err != nil {
		t.Fatalf("deleting an IPReservation of a namespace being deleted: %v", err)
	}
}
