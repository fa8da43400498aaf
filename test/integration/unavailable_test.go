package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestAPIServerOutage: the webhook process loses the apiserver
// for 15 s, longer than the sweeper's renew deadline: its lease is
// lost, yet the same process keeps serving, answers admissions afterwards
// with no restart, and leads the sweeper again within the lease duration.
func TestAPIServerOutage(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		fixtures.Eventually(t, 20*time.Second, poll, "a sweeper leader", func() bool { return s.Total("scw_lb_ipam_sweeper_leader") == 1 })
		restore := s.CutAPIServer()
		defer restore()
		cut := time.Now()
		fixtures.Eventually(t, 15*time.Second, poll, "the lease to be lost", func() bool { return s.Total("scw_lb_ipam_sweeper_leader") == 0 })
		lost := time.Since(cut)
		time.Sleep(15*time.Second - time.Since(cut))
		restore()
		back := time.Now()
		if !s.Serving() {
			t.Fatal("the webhook process ended with the lost lease")
		}
		fixtures.Eventually(t, leaseDuration, poll, "a sweeper leader again within the lease duration", func() bool { return s.Total("scw_lb_ipam_sweeper_leader") == 1 })
		t.Logf("lease lost %s into the outage; leader again %s after it", lost.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
		svc := fixtures.PrivateService("payments", "after-outage", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		defer del(t, svc)
		if got := get(t, "payments", "after-outage"); got.Annotations[ccm.AnnotationPrivateIPIDs] == "" {
			t.Fatal("the admission after the outage reserved nothing")
		}
		if !s.Serving() {
			t.Fatal("the webhook process was restarted")
		}
	})
}

// TestWebhookStopped runs last, its file sorting after the others: it stops
// the webhook.
func TestWebhookStopped(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		// A Service with its Load Balancer, deleted while the webhook is
		// down: the CCM's last patch (the finalizer removed) must not need
		// the webhook, or the Service would stay Terminating for as long
		// as the webhook is down.
		doomed := fixtures.PrivateService("payments", "doomed", map[string]string{request.AnnotationPool: "dc-link"})
		if err := s.Kube.Create(ctx, doomed); err != nil {
			t.Fatal(err)
		}
		attachedTo(t, "payments", "doomed", get(t, "payments", "doomed").Annotations[ccm.AnnotationPrivateIPIDs])
		s.StopWebhook()
		defer func() {
			if err := s.StartWebhook(); err != nil {
				t.Fatal(err)
			}
		}()
		del(t, get(t, "payments", "doomed"))
		err := s.Kube.Create(ctx, fixtures.PrivateService("payments", "while-down", map[string]string{request.AnnotationPool: "dc-link"}))
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("opted-in create with the webhook down: %v", err)
		}
		other := fixtures.PrivateService("plain", "while-down", nil)
		if err := s.Kube.Create(ctx, other); err != nil {
			t.Fatalf("a namespace that did not opt in is affected: %v", err)
		}
		del(t, other)
		internal := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "internal-down"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if err := s.Kube.Create(ctx, internal); err != nil {
			t.Fatalf("a ClusterIP Service in an opted-in namespace is affected: %v", err)
		}
		del(t, internal)
	})
}
