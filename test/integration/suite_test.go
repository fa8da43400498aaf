package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// scenario runs one test of the suite and records its Scaleway calls.
// The CCM's calls are not counted; its log's end is printed on a failure.
func scenario(t *testing.T, f func(t *testing.T)) {
	from := len(s.Emu.Requests())
	defer func() {
		s.record(t, s.WebhookCalls(from))
		if t.Failed() {
			t.Logf("the Scaleway CCM's logs:\n%s", s.CCM.Logs(60))
		}
	}()
	f(t)
}

// poll is how often the suite looks again at what it waits for.
const poll = 100 * time.Millisecond

func clientWithWarnings(t *testing.T) (client.Client, *testenv.Warnings) {
	w := &testenv.Warnings{}
	c, err := s.Client(w)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

func get(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := s.Kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// del deletes a Service and waits until it is gone: the CCM keeps a
// LoadBalancer Service Terminating until its DeleteLB is accepted. The
// CCM's one service worker (--concurrent-service-syncs=1, as shipped) may
// still be working through the Services earlier scenarios made, a few
// Scaleway calls each: 20 s was missed once after TestConcurrentCreates.
func del(t *testing.T, svc *corev1.Service) {
	t.Helper()
	if err := s.Kube.Delete(context.Background(), svc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(svc)
	const wait = 60 * time.Second
	if localrun.Poll(wait, poll, func() bool {
		return apierrors.IsNotFound(s.Kube.Get(context.Background(), key, &corev1.Service{}))
	}) {
		return
	}
	// Often in a t.Cleanup, after scenario printed nothing: say what holds
	// the Service, in the CCM's own words (its lines naming this Service,
	// not one whose name only begins the same).
	left := &corev1.Service{}
	_ = s.Kube.Get(context.Background(), key, left)
	named := regexp.MustCompile(regexp.QuoteMeta(key.String()) + `([^a-z0-9.-]|$)`)
	lines := slices.DeleteFunc(s.CCM.Lines(key.String()), func(l string) bool { return !named.MatchString(l) })
	lines = lines[max(0, len(lines)-40):]
	t.Fatalf("timed out after %s waiting for Service %s to be gone: finalizers %v, Load Balancer ID %q; the CCM's last lines about it:\n%s",
		wait, key, left.Finalizers, left.Annotations[ccm.AnnotationLoadBalancerID], strings.Join(lines, "\n"))
}

func ptr[T any](v T) *T { return &v }

// update changes a Service as kubectl edit does: read, change, write,
// again on a conflict (the CCM patches Services meanwhile).
func update(c client.Client, ns, name string, change func(*corev1.Service)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc := &corev1.Service{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			return err
		}
		change(svc)
		return c.Update(context.Background(), svc)
	})
}

// backfilled waits until the sweeper has written svc's uid on its
// reservation id: from then on it is kept for its pool's retention, not
// the shorter pending grace.
func backfilled(t *testing.T, svc *corev1.Service, id string) {
	t.Helper()
	fixtures.Eventually(t, 15*time.Second, poll, "the uid of "+svc.Namespace+"/"+svc.Name+" back-filled on "+id, func() bool {
		ip, _ := s.Emu.IP(id)
		e, _ := ipam.ParseEntry(ip.Tags)
		return e.UID == string(svc.UID)
	})
}

// attachedTo waits until the CCM has attached IPAM ID id to the
// Load Balancer of Service ns/name, through the Load Balancer API.
func attachedTo(t *testing.T, ns, name, id string) {
	t.Helper()
	attachedIn(t, s.Env, 15*time.Second, ns, name, id)
}

// attachedIn waits until the CCM of cluster env has attached id
// to the Load Balancer of ns/name.
func attachedIn(t *testing.T, env *testenv.Env, timeout time.Duration, ns, name, id string) {
	t.Helper()
	fixtures.Eventually(t, timeout, poll, fmt.Sprintf("%s attached to the Load Balancer of %s/%s", id, ns, name), func() bool {
		return holdsIn(env, ns, name, id)
	})
}

// holdsIn reports whether id is attached to the Load Balancer of ns/name
// in cluster env.
func holdsIn(env *testenv.Env, ns, name, id string) bool {
	svc := &corev1.Service{}
	if err := env.Kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return false
	}
	_, lb, _ := strings.Cut(svc.Annotations[ccm.AnnotationLoadBalancerID], "/")
	ip, ok := env.Emu.IP(id)
	return ok && lb != "" && ip.Resource != nil && ip.Resource.ID == lb && string(ip.Resource.Type) == "lb_server"
}

// routeTo sends the webhook's connections to rs only until restore, or
// the end of the test if it fails first: later scenarios see every replica.
func routeTo(t *testing.T, rs ...*testenv.Replica) (restore func()) {
	restore = s.RouteTo(rs...)
	t.Cleanup(restore)
	return restore
}
