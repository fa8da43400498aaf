package e2e

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// rotateKey runs docs/security.md's key rotation on the guide's install,
// the test standing in for its (cloud) steps: a second key of the
// application in IAM and key.json before the page's block, the first key
// revoked once it returns. The kubelet updates the Secret's volume; no pod
// may restart, no Scaleway call be refused, and a Service created after
// the revocation gets its address.
func rotateKey(t *testing.T, emu *emulator.Server, dir string, runPage func()) {
	t.Helper()
	ctx := context.Background()
	before := podRestarts(t)
	next := testenv.WebhookKey(2)
	emu.AddKey(next)
	writeKeyJSON(t, dir, next)
	began := time.Now()
	runPage()
	t.Logf("%s: every pod signs with the new key %s after the Secret changed", rotationPage, time.Since(began).Round(100*time.Millisecond))
	emu.RevokeKey(testenv.WebhookKey(1).SecretKey)

	svc := fixtures.PrivateService("demo", "api-after-rotation", map[string]string{request.AnnotationPool: "dc-link"})
	if err := cluster.kube.Create(ctx, svc); err != nil {
		t.Fatalf("a Service after the old key's revocation: %v\n%s", err, podReport(t))
	}
	eventually(t, time.Minute, "demo/api-after-rotation to get its reserved address", func() bool {
		got := &corev1.Service{}
		return cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), got) == nil && got.Annotations[request.AnnotationAddresses] != ""
	})
	if after := podRestarts(t); !maps.Equal(before, after) {
		t.Errorf("the rotation restarted pods: before %v, after %v", before, after)
	}
	for _, r := range emu.Requests() {
		if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
			t.Errorf("a Scaleway call was refused during the rotation: %s %s %d", r.Method, r.Path, r.Status)
		}
	}
}

// podRestarts is the release's pods, by UID, with their restart counts.
func podRestarts(t *testing.T) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, p := range releasePods(t) {
		if p.DeletionTimestamp != nil {
			continue
		}
		n := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
		out[p.Name+"/"+string(p.UID)] = n
	}
	return out
}

// checkFence: the security page's upgrade installed the chart's
// NetworkPolicy, which the apiserver stored as rendered. The suite's bridge
// CNI does not enforce it; helm test, in the page's block, showed the
// webhook still answers the apiserver.
func checkFence(t *testing.T) {
	t.Helper()
	list := &networkingv1.NetworkPolicyList{}
	if err := cluster.kube.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || len(list.Items[0].Spec.Ingress) != 2 || len(list.Items[0].Spec.Egress) != 2 {
		t.Fatalf("after the fence's upgrade, NetworkPolicies %+v: want the chart's", list.Items)
	}
}
