package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

const metricsPort = "8443"

// metricsTokens makes two ServiceAccounts in namespace monitoring, the
// first bound to the chart's metrics-reader ClusterRole, and returns a
// bound token of each (TokenRequest, as a projected volume gets).
func metricsTokens(t *testing.T) (reader, other string) {
	t.Helper()
	reader, other, unbind, err := testenv.MetricsTokens(context.Background(), cluster.kube, cluster.clientset, release)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unbind)
	return reader, other
}

// scrape GETs a pod's metrics endpoint at its address on the bridge, the
// certificate checked against the release's CA for the Service's name, as
// Prometheus with a tlsConfig would.
func scrape(t *testing.T, pod corev1.Pod, bearer string) (int, string) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := cluster.kube.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: release + "-tls"}, secret); err != nil {
		t.Fatalf("the release's TLS Secret: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatal("no CA in the release's TLS Secret")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: release + "." + namespace + ".svc"}}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(pod.Status.PodIP, metricsPort)+"/metrics", nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics of pod %s: %v", pod.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var leaderGauge = regexp.MustCompile(`(?m)^scw_lb_ipam_sweeper_leader (\S+)$`)

// TestMetrics: the metrics endpoint answers HTTPS with the webhook's
// certificate to a bound ServiceAccount token whose account the chart's
// metrics-reader role is bound to, 403 to another account's and 401
// without a token (the pod does the TokenReview and SubjectAccessReview
// with its own projected token); and exactly one pod reports leading the
// sweeper, the one the Lease names.
func TestMetrics(t *testing.T) {
	install(t)
	reader, other := metricsTokens(t)
	holder := leader(t, "", 30*time.Second)
	leading := 0
	for _, p := range readyPods(t) {
		if code, _ := scrape(t, p, ""); code != http.StatusUnauthorized {
			t.Errorf("pod %s: metrics without a token: %d, want 401", p.Name, code)
		}
		if code, _ := scrape(t, p, other); code != http.StatusForbidden {
			t.Errorf("pod %s: metrics for a ServiceAccount not bound to the reader role: %d, want 403", p.Name, code)
		}
		code, body := scrape(t, p, reader)
		if code != http.StatusOK || !strings.Contains(body, `scw_lb_ipam_pool_addresses{pool="dc-link",state="total"}`) {
			t.Fatalf("pod %s: metrics for the reader: %d\n%.500s", p.Name, code, body)
		}
		m := leaderGauge.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("pod %s exports no scw_lb_ipam_sweeper_leader", p.Name)
		}
		if m[1] == "1" {
			leading++
			if p.Name != holder {
				t.Errorf("pod %s reports leading the sweeper; the Lease names %s", p.Name, holder)
			}
		}
	}
	if leading != 1 {
		t.Errorf("%d pods report leading the sweeper, want 1", leading)
	}
}

// startLoad creates a Service (prefix-N) every 200 ms until the returned
// stop, which fails the test if any admission failed or any Service went
// without its address, and returns how many were created.
func startLoad(t *testing.T, prefix string) (stop func() int) {
	t.Helper()
	return startLoadIn(t, prefix, "dc-link", "172.16.35.")
}

// startLoadIn is startLoad with Services asking pool, whose addresses
// start with one of addrPrefixes.
func startLoadIn(t *testing.T, prefix, pool string, addrPrefixes ...string) (stop func() int) {
	t.Helper()
	ctx := context.Background()
	var (
		mu      sync.Mutex
		created []string
		failed  []string
	)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			svc := fixtures.PrivateService(optedIn, fmt.Sprintf("%s-%d", prefix, i), map[string]string{request.AnnotationPool: pool})
			err := cluster.kube.Create(ctx, svc)
			mu.Lock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s at %s: %v", svc.Name, time.Now().Format("15:04:05.000"), err))
			} else {
				created = append(created, svc.Name)
			}
			mu.Unlock()
		}
	}()
	// A test that fails midway stops the load before the uninstall.
	var once sync.Once
	halt := func() { once.Do(func() { close(done); <-stopped }) }
	t.Cleanup(halt)
	time.Sleep(time.Second)
	return func() int {
		t.Helper()
		halt()
		if len(failed) > 0 {
			t.Fatalf("%d of %d admissions failed:\n%s\n%s", len(failed), len(failed)+len(created), strings.Join(failed, "\n"), podReport(t))
		}
		// Every Service went through the webhook: each has its address.
		for _, name := range created {
			svc := &corev1.Service{}
			if err := cluster.kube.Get(ctx, client.ObjectKey{Namespace: optedIn, Name: name}, svc); err != nil {
				t.Fatal(err)
			}
			addr := svc.Annotations[request.AnnotationAddresses]
			if !slices.ContainsFunc(addrPrefixes, func(p string) bool { return strings.HasPrefix(addr, p) }) {
				t.Fatalf("Service %s admitted without its address: %v", name, svc.Annotations)
			}
		}
		return len(created)
	}
}

// TestEvictions: evicting both pods at once, as draining their node does,
// is refused for the second while the first one's replacement is not Ready
// (the PodDisruptionBudget), so admissions never stop; the second goes
// once the replacement is Ready.
func TestEvictions(t *testing.T) {
	ctx := context.Background()
	install(t)
	pods := readyPods(t)
	if len(pods) != 2 {
		t.Fatalf("%d Ready pods, want 2\n%s", len(pods), podReport(t))
	}
	// The budget allows one disruption once its controller has counted
	// both pods healthy; before, it would refuse the first eviction too.
	eventually(t, time.Minute, "the PodDisruptionBudget to allow one disruption", func() bool {
		pdb := &policyv1.PodDisruptionBudget{}
		err := cluster.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release}, pdb)
		return err == nil && pdb.Status.DisruptionsAllowed == 1
	})
	stopLoad := startLoad(t, "drain")
	evict := func(name string) error {
		return cluster.clientset.PolicyV1().Evictions(namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	}
	began := time.Now()
	if err := evict(pods[0].Name); err != nil {
		stopLoad()
		t.Fatalf("evicting %s: %v", pods[0].Name, err)
	}
	if err := evict(pods[1].Name); !apierrors.IsTooManyRequests(err) {
		stopLoad()
		t.Fatalf("evicting %s while %s goes: %v, want 429 Too Many Requests from the PodDisruptionBudget", pods[1].Name, pods[0].Name, err)
	}
	refused := 1
	eventually(t, 2*time.Minute, "the PodDisruptionBudget to allow evicting "+pods[1].Name, func() bool {
		err := evict(pods[1].Name)
		if apierrors.IsTooManyRequests(err) {
			refused++
		}
		return err == nil
	})
	second := time.Since(began)
	eventually(t, 2*time.Minute, "both evicted pods to be gone and two new ones Ready", func() bool {
		for _, p := range releasePods(t) {
			if p.Name == pods[0].Name || p.Name == pods[1].Name {
				return false
			}
		}
		return len(readyPods(t)) == 2
	})
	time.Sleep(time.Second)
	created := stopLoad()
	t.Logf("the second eviction refused %d times, allowed after %s; both pods replaced after %s; %d Services created meanwhile",
		refused, second.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond), created)
}

// TestLeaderFailover: deleting the pod that leads the sweeper moves the
// Lease to another Ready pod, and the sweeper resumes there: it back-fills
// a new Service's UID into its reservation, and releases the address once
// the Service is deleted (retention 0).
func TestLeaderFailover(t *testing.T) {
	ctx := context.Background()
	in := install(t, "sweeper.interval=5s")
	first := leader(t, "", 30*time.Second)
	began := time.Now()
	if err := cluster.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: first}}); err != nil {
		t.Fatal(err)
	}
	second := leader(t, first, 90*time.Second)
	t.Logf("the sweeper's Lease moved from %s to %s in %s", first, second, time.Since(began).Round(100*time.Millisecond))

	svc := lbService("released")
	if err := cluster.kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Service{}
	if err := cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
		t.Fatal(err)
	}
	id := got.Annotations[ccm.AnnotationPrivateIPIDs]
	if _, booked := in.emu.IP(id); !booked {
		t.Fatalf("Service not given a booked address: %v", got.Annotations)
	}
	eventually(t, time.Minute, "the new leader's sweeper to back-fill the Service's UID into "+id, func() bool {
		ip, _ := in.emu.IP(id)
		return slices.Contains(ip.Tags, ipam.TagUID+string(got.UID))
	})
	settled(t, optedIn)
	if err := cluster.kube.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, time.Minute, "the new leader's sweeper to release "+id, func() bool {
		_, booked := in.emu.IP(id)
		return !booked
	})
	t.Logf("released %s after the Service's deletion", time.Since(deleted).Round(100*time.Millisecond))
}

// TestUninstall: helm uninstall leaves no Service stuck. A Service the
// Scaleway CCM still holds (its finalizer: its DeleteLB fails, Scaleway
// being unavailable) while the release goes is let go afterwards by the
// CCM's own patch (the UPDATE that drops the finalizer is not sent to a
// webhook that is gone), and Services are created again, unmutated.
func TestUninstall(t *testing.T) {
	ctx := context.Background()
	in := install(t)
	svc := lbService("held")
	if err := cluster.kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the CCM to make the Load Balancer of "+svc.Name, func() bool {
		got := &corev1.Service{}
		return cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), got) == nil && got.Annotations[ccm.AnnotationLoadBalancerID] != "" &&
			slices.Contains(got.Finalizers, ccm.FinalizerLoadBalancerCleanup)
	})
	settled(t, optedIn)
	in.emu.FailNext(emulator.OpDeleteLB, 1_000_000, emulator.Fault{Status: http.StatusServiceUnavailable})
	if err := cluster.kube.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	in.uninstalled = true
	if out, err := helm(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if err := cluster.kube.Get(ctx, client.ObjectKey{Name: release}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the MutatingWebhookConfiguration outlives the release: %v", err)
	}
	held := &corev1.Service{}
	if err := cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), held); err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("the Service the CCM holds after the uninstall: %v (deleting since %v)", err, held.DeletionTimestamp)
	}
	// Scaleway answers again; a change of the Service has the CCM retry at
	// once rather than after its backoff.
	in.emu.FailNext(emulator.OpDeleteLB, 0, emulator.Fault{})
	// A patch, as kubectl label sends: the CCM's own retries write the
	// Service meanwhile, and an update from the copy read above would
	// conflict with them.
	patch := client.MergeFrom(held.DeepCopy())
	held.Labels = map[string]string{"retry": "now"}
	if err := cluster.kube.Patch(ctx, held, patch); err != nil {
		t.Fatalf("labelling the held Service after the uninstall: %v", err)
	}
	eventually(t, time.Minute, "the CCM to let Service "+svc.Name+" go", func() bool {
		return apierrors.IsNotFound(cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))
	})
	after := lbService("after")
	if err := cluster.kube.Create(ctx, after); err != nil {
		t.Fatalf("creating a Service after the uninstall: %v", err)
	}
	if a := after.Annotations[request.AnnotationAddresses]; a != "" {
		t.Fatalf("a Service created after the uninstall was mutated: %v", after.Annotations)
	}
}
