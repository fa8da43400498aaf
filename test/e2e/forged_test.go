package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// The forged run's sweeper: a short pending grace, so that the bound it
// measures takes seconds; docs/security.md scales it to the defaults.
const (
	forgedGrace    = 30 * time.Second
	forgedInterval = 5 * time.Second
	forgedReviews  = 10
)

// TestForgedAdmissionReview measures what docs/security.md says a Pod
// that reaches the webhook's port can do without the NetworkPolicy: it
// sends AdmissionReviews no apiserver sent (CREATEs of Services that will
// never exist), each of which books an address, and the sweeper releases
// every one within the pending grace plus one cycle of its booking.
func TestForgedAdmissionReview(t *testing.T) {
	ctx := context.Background()
	in := install(t, "sweeper.pendingGrace="+forgedGrace.String(), "sweeper.interval="+forgedInterval.String())
	pods := readyPods(t)
	if len(pods) == 0 {
		t.Fatalf("no ready pod\n%s", podReport(t))
	}
	url := fmt.Sprintf("https://%s:9443/mutate-v1-service", pods[0].Status.PodIP)
	ensureNamespace(t, "forger", restricted)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forger", Name: "forger"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "forger", Image: forgerImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{url, optedIn, "dc-link", fmt.Sprint(forgedReviews)},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := cluster.kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.kube.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "forger"}})
	})
	eventually(t, 2*time.Minute, "the forger Pod to complete", func() bool {
		return cluster.kube.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
	})
	out, err := exec.Command(cluster.bin("kubectl"), "--kubeconfig", cluster.kubeconfig, "-n", "forger", "logs", "forger").CombinedOutput()
	if err != nil || pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the forger Pod %s: %v\n%s", pod.Status.Phase, err, out)
	}
	booked, took := 0, int64(0)
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var a struct {
			Allowed, Patched bool
			Ms               int64
			Message          string
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("forger line %q: %v", sc.Text(), err)
		}
		took += a.Ms
		if a.Allowed && a.Patched {
			booked++
		}
	}
	if booked != forgedReviews {
		t.Fatalf("%d of %d forged reviews were answered with a booking:\n%s", booked, forgedReviews, out)
	}

	// Every forged booking is released by the sweeper; none before the
	// pending grace, all within it plus a cycle (and the listing's lag).
	born := map[string]time.Time{}
	for _, ip := range in.emu.IPs() {
		if strings.Contains(strings.Join(ip.Tags, ","), "forged-") {
			born[ip.ID] = *ip.CreatedAt
		}
	}
	if len(born) != forgedReviews {
		t.Fatalf("%d forged bookings in IPAM, want %d", len(born), forgedReviews)
	}
	bound := forgedGrace + 2*forgedInterval
	var youngest, oldest time.Duration
	gone := map[string]bool{}
	if !localrun.Poll(bound+time.Minute, 250*time.Millisecond, func() bool {
		left := map[string]bool{}
		for _, ip := range in.emu.IPs() {
			left[ip.ID] = true
		}
		for id, at := range born {
			if gone[id] || left[id] {
				continue
			}
			gone[id] = true
			age := time.Since(at)
			if youngest == 0 || age < youngest {
				youngest = age
			}
			oldest = max(oldest, age)
		}
		return len(gone) == len(born)
	}) {
		t.Fatalf("%d of %d forged bookings released after %s\n%s", len(gone), len(born), bound+time.Minute, podReport(t))
	}
	t.Logf("forged AdmissionReviews: %d sent from a Pod in %dms (%.0f/s), each booking an address; released by the sweeper %s to %s after their booking (pending grace %s, sweep interval %s)",
		forgedReviews, took, float64(forgedReviews)/(float64(took)/1000), youngest.Round(100*time.Millisecond), oldest.Round(100*time.Millisecond), forgedGrace, forgedInterval)
	if youngest < forgedGrace {
		t.Errorf("a forged booking was released %s after it was made, before the pending grace %s", youngest, forgedGrace)
	}
	if oldest > bound {
		t.Errorf("a forged booking was held %s, past the pending grace and two cycles (%s)", oldest, bound)
	}
}
