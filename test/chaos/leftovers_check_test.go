package chaos

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// TestCCMLetGoCheck: a leftover counts as the CCM's only when the CCM's
// own log shows its service controller removing the cleanup finalizer of
// that Service's life while the Load Balancer stays (no DeleteLB).
func TestCCMLetGoCheck(t *testing.T) {
	lbs := []emulator.LB{{ID: lbID, Name: testenv.CCMPrefix + svcUID}}
	journal := []journalEntry{
		{svc: "payments/web", op: "create", start: at(-time.Second), uid: svcUID, outcome: "ok"},
		{svc: "payments/web", op: "delete", start: at(4 * time.Second), uid: svcUID, outcome: "ok"},
		// The next life of the name.
		{svc: "payments/web", op: "create", start: at(20 * time.Second), uid: "uid-2", outcome: "ok"},
	}
	created := []emulator.AuditEvent{lbEvent(emulator.AuditCreateLB, 0)}
	deleted := append(created, lbEvent(emulator.AuditDeleteLB, 6*time.Second))
	klog := func(d time.Duration, msg string) string {
		return "I" + at(d).Local().Format("0102 15:04:05.000000") + "   4242 controller.go:959] " + msg
	}
	removed := klog(5*time.Second, "Removing finalizer from service payments/web")
	notFound := klog(5*time.Second, "no loadbalancer matching the name "+testenv.CCMPrefix+svcUID)
	renamed := klog(5*time.Second, "load balancer for service payments/web was renamed, not removing")
	nextLife := klog(30*time.Second, "Removing finalizer from service payments/web")
	before := klog(-2*time.Second, "Removing finalizer from service payments/web")
	other := klog(5*time.Second, "Removing finalizer from service payments/web-2")
	live := []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "web", UID: types.UID(svcUID)}}}
	for _, tc := range []struct {
		name     string
		log      []string
		audit    []emulator.AuditEvent
		services []corev1.Service
		lb       string
		want     string
	}{
		{name: "finalizer removed, its lookup found none", log: []string{notFound, removed}, audit: created, lb: lbID, want: notFound + "; " + removed},
		{name: "finalizer removed, taken for renamed", log: []string{renamed, removed}, audit: created, lb: lbID, want: renamed + "; " + removed},
		{name: "finalizer removed, no reason logged", log: []string{removed}, audit: created, lb: lbID, want: removed},
		{name: "the CCM deleted it (DeleteLB)", log: []string{removed}, audit: deleted, lb: lbID},
		{name: "removed in the next life of the name", log: []string{nextLife}, audit: created, lb: lbID},
		{name: "removed before the Load Balancer was made", log: []string{before}, audit: created, lb: lbID},
		{name: "removed from another Service whose name starts alike", log: []string{other}, audit: created, lb: lbID},
		{name: "the Service still lives", log: []string{removed}, audit: created, services: live, lb: lbID},
		{name: "the log says nothing", audit: created, lb: lbID},
		{name: "attached to no Load Balancer of the emulator", log: []string{removed}, audit: created, lb: "lb-gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := func(substr string) []string {
				var out []string
				for _, l := range tc.log {
					if strings.Contains(l, substr) {
						out = append(out, l)
					}
				}
				return out
			}
			if got := ccmLetGo(lines, tc.lb, lbs, tc.services, journal, tc.audit); got != tc.want {
				t.Errorf("ccmLetGo = %q, want %q", got, tc.want)
			}
		})
	}
}
