package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// TestKeyRefusedNamesThePermission: the webhook's key is replaced in its
// Secret by one of the same application without PrivateNetworksReadOnly,
// then by one of another Project. The emulator refuses them as IAM does;
// every replica's readiness and metric name what is missing, and an
// admission with the second is denied naming IPAMFullAccess. A good key
// put back makes them ready, with no restart.
func TestKeyRefusedNamesThePermission(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		starts := incarnations()
		noNetworks := testenv.WebhookKey(100)
		noNetworks.PermissionSets = []string{scaleway.IPAMFullAccess}
		if err := s.SetKey(noNetworks); err != nil {
			t.Fatal(err)
		}
		refusedOnEvery(t, scaleway.PrivateNetworksReadOnly)

		otherProject := testenv.WebhookKey(101)
		otherProject.ProjectIDs = []string{"7c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"}
		if err := s.SetKey(otherProject); err != nil {
			t.Fatal(err)
		}
		refusedOnEvery(t, scaleway.IPAMFullAccess)
		err := s.Kube.Create(ctx, fixtures.PrivateService("payments", "refused-key", map[string]string{request.AnnotationPool: "dc-link"}))
		if err == nil || !strings.Contains(err.Error(), "lacks IPAMFullAccess") {
			t.Errorf("an admission with a key of another Project: %v, want a denial naming IPAMFullAccess", err)
		}

		if _, err := s.RotateKey(time.Minute); err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Replicas {
			if code, body := r.Readyz(); code != http.StatusOK {
				t.Errorf("%s with a good key again: /readyz %d\n%s", r.Name, code, body)
			}
		}
		svc := fixtures.PrivateService("payments", "key-back", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		if get(t, "payments", "key-back").Annotations[ccm.AnnotationPrivateIPIDs] == "" {
			t.Error("the admission with the good key reserved nothing")
		}
		if after := incarnations(); after != starts {
			t.Errorf("the replicas restarted: %s, then %s", starts, after)
		}
	})
}

// refusedOnEvery waits until every replica's /readyz fails on the check
// that names set, and its metric names set.
func refusedOnEvery(t *testing.T, set string) {
	t.Helper()
	fixtures.Eventually(t, 30*time.Second, poll, "every replica to report its key lacks "+set, func() bool {
		for _, r := range s.Replicas {
			code, body := r.Readyz()
			if code != http.StatusInternalServerError || !strings.Contains(body, "[-]scaleway-key-has-"+set+" failed") {
				return false
			}
			if v, ok := r.Gauge("scw_lb_ipam_scaleway_key_refused", "permission_set", set); !ok || v != 1 {
				return false
			}
		}
		return true
	})
}

// incarnations names each replica's current run.
func incarnations() string {
	var b strings.Builder
	for _, r := range s.Replicas {
		b.WriteString(r.Incarnation() + " ")
	}
	return b.String()
}
