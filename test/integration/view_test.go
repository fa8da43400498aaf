package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// condition is the Service's condition of type typ, nil when it has none.
func condition(t *testing.T, ns, name, typ string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(get(t, ns, name).Status.Conditions, typ)
}

// hasCondition waits until the Service's condition typ has status and
// reason, and returns it.
func hasCondition(t *testing.T, timeout time.Duration, ns, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	fixtures.Eventually(t, timeout, poll, fmt.Sprintf("%s/%s's %s=%s (%s)", ns, name, typ, status, reason), func() bool {
		c = condition(t, ns, name, typ)
		return c != nil && c.Status == status && c.Reason == reason
	})
	return *c
}

// reservationView is the IPReservation of IPAM ID id in ns, ok false when
// there is none.
func reservationView(t *testing.T, ns, id string) (st view.ReservationStatus, ok bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(view.ReservationKind)
	err := s.Kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: id}, u)
	if apierrors.IsNotFound(err) {
		return st, false
	}
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := unstructured.NestedMap(u.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		t.Fatal(err)
	}
	return st, true
}

// poolView is the IPPool of pool name.
func poolView(t *testing.T, name string) view.PoolStatus {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(view.PoolKind)
	if err := s.Kube.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	var st view.PoolStatus
	m, _, _ := unstructured.NestedMap(u.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// viewWrites is the leader's scw_lb_ipam_view_writes_total by label.
func viewWrites(t *testing.T) map[string]float64 {
	t.Helper()
	r := leader(t)
	out := map[string]float64{}
	for _, what := range []string{"object", "deletion", "service_conditions", "failed"} {
		v, ok := r.Counter("scw_lb_ipam_view_writes_total", "what", what)
		if !ok {
			t.Fatalf("%s exports no scw_lb_ipam_view_writes_total{what=%q}", r.Name, what)
		}
		out[what] = v
	}
	return out
}

// TestView: what a user sees with kubectl. A Service created while the
// CCM is down gets Reserved=True and Applied=False (no Load Balancer yet),
// then Applied=True once the CCM made it and patched the status, Reserved
// untouched by that patch; a leader change writes nothing; its
// IPReservation is Live, then Retained with its release time once the
// Service is deleted, then gone once released; the IPPool counts what
// status and the metrics count.
func TestView(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		const ns, name = "web", "seen"
		down := make(chan error, 1)
		go func() { down <- s.CCM.Kill(0, 10*time.Second) }()
		time.Sleep(500 * time.Millisecond) // the kill lands first
		if err := s.Kube.Create(ctx, fixtures.PrivateService(ns, name, map[string]string{request.AnnotationPool: "dc-link"})); err != nil {
			t.Fatal(err)
		}
		svc := get(t, ns, name)
		t.Cleanup(func() { del(t, svc) })
		x := svc.Annotations[ccm.AnnotationPrivateIPIDs]
		addr := svc.Annotations[request.AnnotationAddresses]
		reserved := hasCondition(t, 8*time.Second, ns, name, view.ConditionReserved, metav1.ConditionTrue, "Reserved")
		if want := fmt.Sprintf("IPAM IP %s (%s) in pool dc-link", x, addr); reserved.Message != want {
			t.Fatalf("Reserved's message %q, want %q", reserved.Message, want)
		}
		hasCondition(t, 5*time.Second, ns, name, view.ConditionApplied, metav1.ConditionFalse, "LoadBalancerPending")
		if len(get(t, ns, name).Status.LoadBalancer.Ingress) != 0 {
			t.Fatal("the status has addresses before the CCM ran: the order this test needs did not happen")
		}
		if err := <-down; err != nil {
			t.Fatal(err)
		}
		attachedTo(t, ns, name, x)
		applied := hasCondition(t, 20*time.Second, ns, name, view.ConditionApplied, metav1.ConditionTrue, "Applied")
		got := get(t, ns, name)
		if len(got.Status.LoadBalancer.Ingress) == 0 {
			t.Fatal("Applied=True before the CCM wrote the status")
		}
		if c := condition(t, ns, name, view.ConditionReserved); c == nil || *c != reserved {
			t.Fatalf("the CCM's status patch changed Reserved: %+v, was %+v", c, reserved)
		}
		t.Logf("Reserved since %s; Applied: %s", reserved.LastTransitionTime, applied.Message)

		st, ok := reservationView(t, ns, x)
		if !ok || st.State != view.StateLive || st.Address != addr || st.Pool != "dc-link" || st.Service != name || st.AttachedTo == "" {
			t.Fatalf("IPReservation %s/%s: %+v (found %v), want Live, %s, dc-link, %s, attached", ns, x, st, ok, addr, name)
		}

		// A leader change: the new leader reads the view and the
		// conditions and writes nothing, as every idle cycle.
		// The view is settled first: every replica's index counts the
		// pools alike (a standby's index lags the leader's listings), and
		// the leader's last cycles wrote nothing.
		fixtures.Eventually(t, 90*time.Second, poll, "the replicas' pool counts alike and the view idle", func() bool {
			for _, r := range s.Replicas[1:] {
				if !maps.Equal(r.Gauges("scw_lb_ipam_pool_addresses"), s.Replicas[0].Gauges("scw_lb_ipam_pool_addresses")) {
					return false
				}
			}
			w := viewWrites(t)
			waitSweeps(t, 2)
			return maps.Equal(viewWrites(t), w)
		})
		old := leader(t)
		before := get(t, ns, name)
		old.Kill()
		t.Cleanup(func() {
			if err := old.Start(); err != nil {
				t.Error(err)
			}
		})
		next := leader(t)
		if next == old {
			t.Fatal("the killed replica still leads")
		}
		writes := viewWrites(t)
		waitSweeps(t, 3)
		if w := viewWrites(t); !maps.Equal(w, writes) {
			t.Fatalf("the new leader's idle cycles wrote the view: %v, then %v", writes, w)
		}
		after := get(t, ns, name)
		if after.ResourceVersion != before.ResourceVersion {
			t.Fatalf("the Service was written across the leader change: %+v", after.Status.Conditions)
		}

		// The IPPool counts what status and the metrics count.
		counted(t, "dc-link")

		// Deleted: retained, with its release time, then released.
		del(t, svc)
		fixtures.Eventually(t, 10*time.Second, poll, "the IPReservation retained", func() bool {
			st, ok = reservationView(t, ns, x)
			return ok && st.State == view.StateRetained && st.ReleaseAt != nil
		})
		if d := st.ReleaseAt.Sub(st.RetainedSince.Time); d != retention {
			t.Fatalf("retained since %s until %s: %s, want the pool's retention %s", st.RetainedSince, st.ReleaseAt, d, retention)
		}
		fixtures.Eventually(t, retention+15*time.Second, poll, "the IPReservation gone with the release", func() bool {
			_, ok := reservationView(t, ns, x)
			return !ok
		})
		if _, held := s.Emu.IP(x); held {
			t.Fatalf("the IPReservation is gone while IPAM still holds %s", x)
		}
	})
}

// counted waits until the pool's IPPool, scw-lb-ipam status and the
// leader's scw_lb_ipam_pool_addresses agree: the IPPool and the gauge read
// the leader's inventory, which learns another replica's bookings at its
// next listing (--index-refresh-interval, a minute), status lists now.
func counted(t *testing.T, pool string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(s.PoolFile()), 0o600); err != nil {
		t.Fatal(err)
	}
	fixtures.EventuallySays(t, 80*time.Second, time.Second, "the IPPool, status and the metrics to agree", func() (bool, string) {
		var out bytes.Buffer
		if err := app.Status(context.Background(), app.StatusOptions{ConfigFile: file, Output: "json", ScalewayOptions: s.ScalewayOptions(), Services: s.Kube}, &out); err != nil {
			t.Fatal(err)
		}
		var report struct {
			Pools []struct {
				Pool                                               string
				Total, UsedByCluster, UsedByOthers, Retained, Free uint64
			}
		}
		if err := json.Unmarshal(out.Bytes(), &report); err != nil {
			t.Fatalf("status -o json: %v", err)
		}
		v := poolView(t, pool)
		r := leader(t)
		metric := func(state string) uint64 {
			f, _ := r.Gauge("scw_lb_ipam_pool_addresses", "pool", pool, "state", state)
			return uint64(f)
		}
		for _, p := range report.Pools {
			if p.Pool != pool {
				continue
			}
			seen := fmt.Sprintf("IPPool %+v; status %+v; metrics free=%d used_by_cluster=%d retained=%d used_by_others=%d", v, p, metric("free"), metric("used_by_cluster"), metric("retained"), metric("used_by_others"))
			return v.Total == p.Total && v.Free == p.Free && v.InUse+v.Retained == p.UsedByCluster && v.Retained == p.Retained && v.HeldByOthers == p.UsedByOthers &&
				metric("free") == v.Free && metric("used_by_cluster") == v.InUse+v.Retained && metric("retained") == v.Retained && metric("used_by_others") == v.HeldByOthers, seen
		}
		return false, "status lists no pool " + pool
	})
}
