package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// checkView: what the release shows of the Service it reserved id (addr)
// for, in namespace optedIn. The Service carries Reserved and Applied; a
// tenant's ServiceAccount bound to the view role in optedIn lists the
// namespace's IPReservations (kube-controller-manager aggregates the
// chart's role into view) and is refused another namespace's and any
// change; a cluster admin's change is refused by the chart's policy;
// kubectl prints the columns docs/usage.md shows.
func checkView(t *testing.T, svc types.NamespacedName, id, addr string) {
	ctx := context.Background()
	// The leader's next cycle (--sweep-interval) shows them.
	eventually(t, 2*time.Minute, "Reserved and Applied on "+svc.String(), func() bool {
		var got corev1.Service
		return cluster.kube.Get(ctx, svc, &got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, view.ConditionReserved) && meta.IsStatusConditionTrue(got.Status.Conditions, view.ConditionApplied)
	})

	const tenant = "tenant"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: tenant}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: optedIn, Name: tenant + "-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: optedIn, Name: tenant}}}
	for _, o := range []client.Object{sa, rb} {
		if err := cluster.kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.kube.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(cluster.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + optedIn + ":" + tenant}
	as, err := client.New(cfg, client.Options{Scheme: cluster.kube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := func(c client.Client, ns string) (*unstructured.UnstructuredList, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(view.ReservationKind.GroupVersion().WithKind("IPReservationList"))
		return l, c.List(ctx, l, client.InNamespace(ns))
	}
	var mine *unstructured.Unstructured
	eventually(t, time.Minute, "the tenant to list IPReservation "+id, func() bool {
		l, err := list(as, optedIn)
		if err != nil {
			return false
		}
		for i := range l.Items {
			if l.Items[i].GetName() == id {
				mine = &l.Items[i]
			}
		}
		return mine != nil
	})
	if got, _, _ := unstructured.NestedString(mine.Object, "status", "address"); got != addr {
		t.Errorf("IPReservation %s shows address %q, want %s", id, got, addr)
	}
	if _, err := list(as, namespace); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant listing the IPReservations of namespace %s: %v, want Forbidden", namespace, err)
	}
	edit := func(c client.Client) error {
		u := mine.DeepCopy()
		_ = unstructured.SetNestedField(u.Object, "10.0.0.1", "status", "address")
		return c.Update(ctx, u)
	}
	if err := edit(as); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant changing IPReservation %s: %v, want Forbidden", id, err)
	}
	if err := edit(cluster.kube); err == nil || !strings.Contains(err.Error(), "read-only view") {
		t.Errorf("a cluster admin changing IPReservation %s: %v, want refused as a read-only view", id, err)
	}

	// What a user types: the columns of docs/usage.md.
	for _, args := range [][]string{{"get", "ippools"}, {"get", "ipreservations", "-n", optedIn}} {
		out, err := exec.Command(cluster.bin("kubectl"), append([]string{"--kubeconfig", cluster.kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
		want := map[string][]string{"ippools": {"NAME", "SUBNET", "TOTAL", "FREE", "IN", "USE", "RETAINED", "OTHERS", "EXHAUSTED"},
			"ipreservations": {"NAME", "ADDRESS", "POOL", "SERVICE", "STATE", "RELEASE", "AT", "ATTACHED", "TO"}}[args[1]]
		if strings.Join(header, " ") != strings.Join(want, " ") || (args[1] == "ipreservations" && !strings.Contains(string(out), addr)) {
			t.Errorf("kubectl %s printed:\n%s\nwant the columns %v (and %s)", strings.Join(args, " "), out, want, addr)
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
}
