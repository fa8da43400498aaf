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
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// TestKeyRefusedNamesThePermission: keys of the webhook's application are
// put in its Secret that the emulator refuses as IAM does. One without
// PrivateNetworksReadOnly, while the key in use is accepted, is kept out.
// With the key in use revoked, another such key goes in all the same, and
// one of another Project after it: every replica's metric names the set it
// lacks, an admission is denied naming IPAMFullAccess, and the replicas,
// which served, stay ready. A good key put back clears it all, with no
// restart.
func TestKeyRefusedNamesThePermission(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		starts := incarnations()
		inUse := s.KeyInUse()
		noNetworks := testenv.WebhookKey(100)
		noNetworks.PermissionSets = []string{scaleway.IPAMFullAccess}
		refusedBefore := refusedReads()
		if err := s.SetKey(noNetworks); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, 30*time.Second, poll, "every replica to probe the new key", func() bool {
			return refusedReads() >= refusedBefore+len(s.Replicas)
		})
		for _, r := range s.Replicas {
			if v, ok := r.Gauge("scw_lb_ipam_scaleway_key_info", "access_key", inUse.AccessKey); !ok || v != 1 || r.KeyRefused() {
				t.Errorf("%s put a refused key in use while its own was accepted", r.Name)
			}
		}

		// The key in use revoked first, then another key without the set
		// mounted: each replica finds its own key refused too (a replica
		// that made no call since, by probing it) and puts the new one in.
		s.Emu.RevokeKey(inUse.SecretKey)
		err := s.Kube.Create(ctx, fixtures.PrivateService("payments", "revoked-key", map[string]string{request.AnnotationPool: "dc-link"}))
		if err == nil || !strings.Contains(err.Error(), "unknown, revoked or expired") {
			t.Errorf("an admission with the key in use revoked: %v", err)
		}
		noNetworks = testenv.WebhookKey(102)
		noNetworks.PermissionSets = []string{scaleway.IPAMFullAccess}
		if err := s.SetKey(noNetworks); err != nil {
			t.Fatal(err)
		}
		refusedOnEvery(t, noNetworks.AccessKey, scaleway.PrivateNetworksReadOnly, 30*time.Second)

		otherProject := testenv.WebhookKey(101)
		otherProject.ProjectIDs = []string{"7c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"}
		if err := s.SetKey(otherProject); err != nil {
			t.Fatal(err)
		}
		refusedOnEvery(t, otherProject.AccessKey, scaleway.IPAMFullAccess, 30*time.Second)
		err = s.Kube.Create(ctx, fixtures.PrivateService("payments", "refused-key", map[string]string{request.AnnotationPool: "dc-link"}))
		if err == nil || !strings.Contains(err.Error(), "lacks IPAMFullAccess") {
			t.Errorf("an admission with a key of another Project: %v, want a denial naming IPAMFullAccess", err)
		}

		if _, err := s.RotateKey(time.Minute); err != nil {
			t.Fatal(err)
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

// refusedReads counts the Private Network reads the emulator refused.
func refusedReads() int {
	n := 0
	for _, r := range s.Emu.Requests() {
		if r.Op == emulator.OpGetPrivateNetwork && r.Status == http.StatusForbidden {
			n++
		}
	}
	return n
}

// refusedOnEvery waits until every replica signs with access, its metric
// says the key lacks set, and it stays ready: it served before.
func refusedOnEvery(t *testing.T, access, set string, within time.Duration) {
	t.Helper()
	fixtures.Eventually(t, within, poll, "every replica to sign with "+access+" and report it lacks "+set, func() bool {
		for _, r := range s.Replicas {
			if v, ok := r.Gauge("scw_lb_ipam_scaleway_key_info", "access_key", access); !ok || v != 1 {
				return false
			}
			if v, ok := r.Gauge("scw_lb_ipam_scaleway_key_refused", "permission_set", set); !ok || v != 1 {
				return false
			}
		}
		return true
	})
	for _, r := range s.Replicas {
		if code, body := r.Readyz(); code != http.StatusOK {
			t.Errorf("%s, which served, is made unready by its key: %d\n%s", r.Name, code, body)
		}
	}
}

// incarnations names each replica's current run.
func incarnations() string {
	var b strings.Builder
	for _, r := range s.Replicas {
		b.WriteString(r.Incarnation() + " ")
	}
	return b.String()
}
