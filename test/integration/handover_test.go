package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// startGreen starts cluster green beside the suite's cluster it: its own
// kube-apiserver, webhook and Scaleway CCM, on the suite's emulator, with
// the suite's pool file but for its clusterName, and dc-link adopting from
// it. It returns green's pool file.
func startGreen(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	pools := strings.Replace(s.PoolFile(), "clusterName: it", "clusterName: green", 1)
	pools = strings.Replace(pools, "{name: dc-link, ", "{name: dc-link, adoptFrom: [it], ", 1)
	green, err := testenv.Start(testenv.Options{Share: s.Env, PoolFile: pools, Replicas: 1, Args: serveArgs,
		Namespaces: map[string]bool{"payments": true, "scw-lb-ipam": true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(green.Stop)
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(pools), 0o600); err != nil {
		t.Fatal(err)
	}
	return green, file
}

// entryOf is the ledger of IPAM ID id in the emulator; ok false when gone.
func entryOf(id string) (ipam.Entry, bool) {
	ip, ok := s.Emu.IP(id)
	if !ok {
		return ipam.Entry{}, false
	}
	e, _ := ipam.ParseEntry(ip.Tags)
	return e, true
}

// TestHandOverBetweenClusters: a blue/green cluster migration on one
// Scaleway Project. Cluster it's payments/migrated holds X, attached to its
// Load Balancer; cluster green creates payments/migrated in dc-link, which
// adopts from it: admitted with X, re-tagged to green, green's Load
// Balancer without X until it's Service is deleted, then attached with X by
// green's CCM, and it's sweeper never releases X. Then handover
// moves it's retained reservations: --dry-run lists and writes nothing.
func TestHandOverBetweenClusters(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		green, greenPools := startGreen(t)
		ann := map[string]string{request.AnnotationPool: "dc-link"}
		old := fixtures.PrivateService("payments", "migrated", ann)
		if err := s.Kube.Create(ctx, old); err != nil {
			t.Fatal(err)
		}
		x := get(t, "payments", "migrated").Annotations[ccm.AnnotationPrivateIPIDs]
		attachedTo(t, "payments", "migrated", x)
		itUID := get(t, "payments", "migrated").UID
		backfilled(t, get(t, "payments", "migrated"), x)

		w := &testenv.Warnings{}
		gc, err := green.Client(w)
		if err != nil {
			t.Fatal(err)
		}
		if err := gc.Create(ctx, fixtures.PrivateService("payments", "migrated", ann)); err != nil {
			t.Fatal(err)
		}
		migrated := &corev1.Service{}
		if err := green.Kube.Get(ctx, client.ObjectKey{Namespace: "payments", Name: "migrated"}, migrated); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = green.Kube.Delete(context.Background(), migrated) })
		if got := migrated.Annotations[ccm.AnnotationPrivateIPIDs]; got != x {
			t.Fatalf("green's payments/migrated got %q, want X %s", got, x)
		}
		if warnings := strings.Join(w.List(), "\n"); !strings.Contains(warnings, "from cluster it") {
			t.Fatalf("the warnings do not say X was adopted from cluster it:\n%s", warnings)
		}
		if e, _ := entryOf(x); e.Cluster != "green" || e.UID == string(itUID) {
			t.Fatalf("X's ledger after the adoption: %+v", e)
		}
		// The cut-over: green's Load Balancer gets X only once it's lets go.
		time.Sleep(3 * time.Second)
		if holdsIn(green, "payments", "migrated", x) || !holdsIn(s.Env, "payments", "migrated", x) {
			t.Fatal("X moved to green's Load Balancer while it's still held it")
		}
		del(t, get(t, "payments", "migrated"))
		// Green's CCM retries its attach with the service controller's
		// backoff (5 s, doubling).
		attachedIn(t, green, 60*time.Second, "payments", "migrated", x)
		// It's sweeper, cycles every second, past X's retention there: X
		// stays, green's.
		time.Sleep(retention + 3*time.Second)
		if e, ok := entryOf(x); !ok || e.Cluster != "green" || !e.OrphanedSince.IsZero() {
			t.Fatalf("X after it's sweeper ran past the retention: %+v (exists %v)", e, ok)
		}

		// A Service of it deleted: its reservation Y is retained there.
		gone := fixtures.PrivateService("payments", "retired", ann)
		if err := s.Kube.Create(ctx, gone); err != nil {
			t.Fatal(err)
		}
		y := get(t, "payments", "retired").Annotations[ccm.AnnotationPrivateIPIDs]
		backfilled(t, get(t, "payments", "retired"), y)
		del(t, get(t, "payments", "retired"))
		fixtures.Eventually(t, 10*time.Second, 20*time.Millisecond, "Y retained in cluster it", func() bool {
			e, _ := entryOf(y)
			return !e.OrphanedSince.IsZero()
		})
		// Within the reuse window (the first retention-margin of it).
		o := app.HandoverOptions{ConfigFile: greenPools, From: "it", To: "green", DryRun: true,
			WebhookTimeout: webhookTimeout, PendingGrace: pendingGrace, ScalewayOptions: s.ScalewayOptions()}
		before, _ := s.Emu.IP(y)
		var out bytes.Buffer
		if err := app.Handover(ctx, o, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "would move ") || !strings.Contains(out.String(), "payments/retired pool dc-link") || strings.Contains(out.String(), x) {
			t.Fatalf("handover --dry-run printed:\n%s", out.String())
		}
		if after, _ := s.Emu.IP(y); !ipam.SameTags(after.Tags, before.Tags) {
			t.Fatalf("the dry run wrote %v", after.Tags)
		}
		o.DryRun = false
		out.Reset()
		if err := app.Handover(ctx, o, &out); err != nil {
			t.Fatal(err)
		}
		t.Logf("handover:\n%s", out.String())
		e, _ := entryOf(y)
		if !strings.Contains(out.String(), "moved 1 retained reservation(s) of cluster it to cluster green") || e.Cluster != "green" || e.UID == "" || e.OrphanedSince.IsZero() {
			t.Fatalf("after the handover: %+v\n%s", e, out.String())
		}
		// It's sweeper never releases Y; green's does, after its own
		// retention.
		fixtures.Eventually(t, retention+10*time.Second, poll, "green's sweeper to release Y", func() bool {
			_, ok := s.Emu.IP(y)
			return !ok
		})
	})
}
