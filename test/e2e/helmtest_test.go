package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// TestHelmTest runs helm test on the real kubelet: the chart's preflight
// Pod starts from the image as its own ServiceAccount, reaches the
// emulator over the bridge and the apiserver through the kubernetes
// Service, books and releases one canary, and its dry run is answered by
// the webhook through the Service's endpoints. With the Deployment scaled
// to zero, the same helm test fails, and preflight's output says the
// apiserver could not call the webhook.
func TestHelmTest(t *testing.T) {
	in := install(t, "tests.preflight.write=true", "tests.preflight.namespace="+optedIn)

	in.emu.ResetCounts()
	began := time.Now()
	out, err := helm(t, "test", release, "--namespace", namespace, "--logs", "--timeout", "3m")
	if err != nil {
		t.Fatalf("helm test against a working install: %v\n%s\n%s", err, out, podReport(t))
	}
	t.Logf("helm test passed in %s", time.Since(began).Round(100*time.Millisecond))
	for _, want := range []string{
		"ok  credentials: ",
		"ok  pool dc-link network: ",
		"ok  pool dc-link canary: booked 172.16.35.",
		"ok  webhook configuration: " + release + ": 1 webhook(s)",
		"ok  opted-in namespace: " + optedIn + ", which may use pool dc-link",
		"ok  webhook dry run: the webhook answered " + release + "-preflight-",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("helm test's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("helm test's output has a failed check:\n%s", out)
	}
	if book, rel := in.emu.Count(emulator.OpBookIP), in.emu.Count(emulator.OpReleaseIP); book != 1 || rel != 1 {
		t.Errorf("helm test booked %d and released %d addresses; want the one canary, booked and released (the dry run books nothing)", book, rel)
	}

	// No pod behind the webhook's Service: the apiserver has no endpoint
	// to call, and the webhook's failurePolicy is Fail.
	ctx := context.Background()
	deploy := &appsv1.Deployment{}
	if err := cluster.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release}, deploy); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(deploy.DeepCopy())
	zero := int32(0)
	deploy.Spec.Replicas = &zero
	if err := cluster.kube.Patch(ctx, deploy, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the release's pods to be gone", func() bool { return len(releasePods(t)) == 0 })
	out, err = helm(t, "test", release, "--namespace", namespace, "--logs", "--timeout", "3m")
	if err == nil {
		t.Fatalf("helm test passed with no webhook pod:\n%s", out)
	}
	for _, want := range []string{
		"ok  credentials: ",
		"FAIL webhook dry run: a dry-run create of LoadBalancer Service " + optedIn + "/" + release + "-preflight-",
		"the apiserver could not call the webhook",
		release + "-preflight",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("helm test's output with no webhook pod lacks %q:\n%s", want, out)
		}
	}
	// A failed test leaves nothing behind: its Pod (once --logs printed
	// its lines) and its RBAC, cluster-wide rights included.
	for _, o := range chartLeftovers(t) {
		if strings.Contains(o, "preflight") {
			t.Errorf("the failed helm test left %s", o)
		}
	}
	t.Logf("helm test with no webhook pod fails as it should:\n%s", out)
}
