package chaos

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
)

// TestCCMLetGoCheck: a leftover counts as the CCM's only when the CCM's
// own log says it found no Load Balancer for the Service after that Load
// Balancer was made, and the Service is gone.
func TestCCMLetGoCheck(t *testing.T) {
	lbs := []scalewaytest.LB{{ID: lbID, Name: testenv.CCMPrefix + svcUID}}
	uids := map[string]string{svcUID: "payments/web"}
	audit := []scalewaytest.AuditEvent{lbEvent(scalewaytest.AuditCreateLB, 0)}
	klog := func(d time.Duration, msg string) string {
		return "I" + at(d).Local().Format("0102 15:04:05.000000") + "   4242 loadbalancers.go:110] " + msg
	}
	byName := klog(5*time.Second, "no loadbalancer matching the name "+testenv.CCMPrefix+svcUID)
	byService := klog(5*time.Second, "no load balancer found for service payments/web")
	before := klog(-time.Second, "no load balancer found for service payments/web")
	other := klog(5*time.Second, "no load balancer found for service payments/web-2")
	live := []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "web", UID: types.UID(svcUID)}}}
	for _, tc := range []struct {
		name     string
		log      []string
		services []corev1.Service
		lb       string
		want     string
	}{
		{name: "its name lookup found none", log: []string{byName}, lb: lbID, want: byName},
		{name: "no Load Balancer for the Service", log: []string{byService}, lb: lbID, want: byService},
		{name: "said before the Load Balancer was made (an earlier life of the name)", log: []string{before}, lb: lbID},
		{name: "said of another Service whose name starts alike", log: []string{other}, lb: lbID},
		{name: "the Service still lives", log: []string{byName}, services: live, lb: lbID},
		{name: "the log says nothing", lb: lbID},
		{name: "attached to no Load Balancer of the emulator", log: []string{byName}, lb: "lb-gone"},
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
			if got := ccmLetGo(lines, tc.lb, lbs, tc.services, uids, audit); got != tc.want {
				t.Errorf("ccmLetGo = %q, want %q", got, tc.want)
			}
		})
	}
}
