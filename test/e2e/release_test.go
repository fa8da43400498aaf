package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// The release, as docs/install.md installs it.
const (
	release   = "scw-lb-ipam"
	namespace = "scw-lb-ipam"
	// optedIn is the opted-in namespace the tests' Services go to.
	optedIn = "payments"
	// poolRange is the pool's range in the "dc" network: room for the
	// Services the rollout's client creates.
	poolRange = "172.16.35.10-172.16.35.250"
)

// installation is a release of the chart on the node, with the emulator
// it talks to.
type installation struct {
	emu         *emulator.Server
	pns         map[string]emulator.PrivateNetwork
	values      string
	uninstalled bool
}

// install starts the emulator on the bridge (where the pods and the CCM
// reach it: never 127.0.0.1, which is each pod's own) and the Scaleway CCM
// (startCCM), and runs helm install --wait
// with the image by digest, self-managed TLS and two replicas; sets are
// extra --set flags. The pool's retention is 0, so that a deleted
// Service's address is released at the sweeper's next cycle.
func install(t *testing.T, sets ...string) *installation {
	t.Helper()
	return installRelease(t, chartDir(), cluster.digest, fmt.Sprintf("    - {name: dc-link, privateNetworkID: {{dc}}, ranges: [%q], namespaces: [%s], retention: 0s}\n", poolRange, optedIn), sets...)
}

// installRelease is install with a chart, an image (by its index digest,
// imported on the node) and the pool file's pools ({{dc}} and {{dc2}}
// name the "dc" and "dc2" networks' IDs).
func installRelease(t *testing.T, chart, digest, pools string, sets ...string) *installation {
	t.Helper()
	in := &installation{emu: newEmulator()}
	url, err := in.emu.Start(nodeIP + ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.emu.Close() })
	if in.pns, err = in.emu.AddPrivateNetworks("nodes=172.16.0.0/22", "dc=172.16.32.0/22", "dc2=172.16.40.0/22"); err != nil {
		t.Fatal(err)
	}
	// The CCM stops after the release's uninstall (cleanups run last in,
	// first out): it lets the tests' Services go.
	startCCM(t, url, in.pns["nodes"].ID)
	ensureNamespace(t, optedIn, map[string]string{request.LabelEnabled: "true"})
	// The release's namespace enforces the Pod Security Standard a platform
	// team puts on an add-on's: the apiserver refuses a Pod of the chart
	// that does not meet it, the helm test Pod's included.
	ensureNamespace(t, namespace, restricted)
	in.values = filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(in.values, fmt.Appendf(nil, `replicaCount: 2
image:
  digest: %s
  pullPolicy: Never
tls:
  mode: self-managed
config:
  clusterName: e2e
  region: fr-par
  clusterPrivateNetworkID: %s
  pools:
%s
scaleway:
  accessKey: %s
  secretKey: %s
  projectID: %s
  apiURL: %s
`, digest, in.pns["nodes"].ID, strings.NewReplacer("{{dc}}", in.pns["dc"].ID, "{{dc2}}", in.pns["dc2"].ID).Replace(strings.TrimRight(pools, "\n")), testenv.AccessKey, testenv.SecretKey, emulator.DefaultProjectID, url), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", release, chart, "--namespace", namespace, "--create-namespace",
		"--values", in.values, "--wait", "--timeout", "3m"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	began := time.Now()
	t.Cleanup(func() { in.uninstall(t) })
	if err := helmWatchingPods(t, args...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, podReport(t))
	}
	t.Logf("helm install --wait: %s", time.Since(began).Round(100*time.Millisecond))
	return in
}

// newEmulator is Scaleway as the suite's node meets it: at Scaleway's own
// pace, a Load Balancer ready 3 s after its creation and each change to it
// settling in 2 s (the other suites keep 0, faster than the real API).
//
// It knows the owner's key, which the CCM and most releases use, and the
// first key of scw-lb-ipam's own application (testenv.WebhookKey), which
// the guide's install uses.
func newEmulator() *emulator.Server {
	return emulator.New(emulator.Options{SecretKey: testenv.SecretKey, Keys: []emulator.Key{testenv.WebhookKey(1)},
		LBCreateDelay: emulator.ScalewayLBCreateDelay, LBSettleDelay: emulator.ScalewayLBSettleDelay})
}

// chartDir is the chart the suite installs: the repository's, or
// SCW_LB_IPAM_E2E_CHART's (a changed copy, for a negative control).
func chartDir() string {
	if d := os.Getenv("SCW_LB_IPAM_E2E_CHART"); d != "" {
		return d
	}
	return filepath.Join(repoRoot, "charts", "scw-lb-ipam")
}

// uninstall runs helm uninstall --wait once, then removes what outlives a
// release by design (the tests' Services, and the release namespace with
// the Secret and Lease the pods made): the next test starts afresh.
func (in *installation) uninstall(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if !in.uninstalled {
		in.uninstalled = true
		if out, err := helm(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	}
	settled(t, optedIn)
	if err := cluster.kube.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace(optedIn)); err != nil {
		t.Errorf("deleting the tests' Services: %v", err)
	}
	if err := cluster.kube.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting namespace %s: %v", namespace, err)
	}
	eventually(t, 2*time.Minute, "namespace "+namespace+" and the tests' Services to be gone", func() bool {
		svcs := &corev1.ServiceList{}
		err := cluster.kube.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
		return apierrors.IsNotFound(err) && cluster.kube.List(ctx, svcs, client.InNamespace(optedIn)) == nil && len(svcs.Items) == 0
	})
}

// settled waits until the CCM has given each LoadBalancer Service of
// namespace ns its Load Balancer's addresses (an ingress in its status),
// before a test deletes them. At Scaleway's pace a Load Balancer is ready
// seconds after its creation, and the CCM attaches its Private Networks
// only then: a private Service deleted before that stays Terminating, as
// the CCM's cleanup asks its Load Balancer's status first, finds no
// private address ("no private network ip for lb") and retries for ever.
func settled(t *testing.T, ns string) {
	t.Helper()
	eventually(t, 3*time.Minute, "the CCM to give every Service of "+ns+" its Load Balancer's addresses", func() bool {
		svcs := &corev1.ServiceList{}
		if cluster.kube.List(context.Background(), svcs, client.InNamespace(ns)) != nil {
			return false
		}
		for _, svc := range svcs.Items {
			if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) == 0 {
				return false
			}
		}
		return true
	})
}

// eventually is fixtures.Eventually at 250 ms whose failure also says where
// the release's pods stand: their events and logs are read once, at the
// timeout, not at every poll as an account of cond would be.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !localrun.Poll(timeout, 250*time.Millisecond, cond) {
		t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, podReport(t))
	}
}

// helm runs bin/helm on the node's cluster, with a private home.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helmContext(context.Background(), t, args...)
}

func helmContext(ctx context.Context, t *testing.T, args ...string) (string, error) {
	cmd := testenv.HelmCommand(ctx, cluster.bin("helm"), t.TempDir(), append(args, "--kubeconfig", cluster.kubeconfig)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// helmWatchingPods runs helm (install or upgrade, --wait) and stops it as
// soon as a pod of the release shows it will not become Ready: a container
// that cannot start, that restarted, or that runs unready for a minute.
// The error says what the pod shows; podReport has the rest.
func helmWatchingPods(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := helmContext(ctx, t, args...)
		done <- result{out, err}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return fmt.Errorf("%w\n%s", r.err, r.out)
			}
			return nil
		case <-tick.C:
		}
		if why := unhealthyPod(t); why != "" {
			cancel()
			<-done
			return errors.New(why)
		}
	}
}

// unhealthyPod says which pod of the release will not become Ready, and
// why; "" if none.
func unhealthyPod(t *testing.T) string {
	for _, p := range releasePods(t) {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "ContainerCreating" && cs.State.Waiting.Reason != "PodInitializing":
				return fmt.Sprintf("pod %s: container %s waiting: %s: %s", p.Name, cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.RestartCount > 0:
				last := ""
				if term := cs.LastTerminationState.Terminated; term != nil {
					last = fmt.Sprintf(" (last exit %d, %s)", term.ExitCode, term.Reason)
				}
				// A container the kubelet stopped (a failed liveness
				// probe) exits cleanly: the cause is in the events.
				events := podEvents(t, p.Name)
				if events == "" {
					events = "none"
				}
				return fmt.Sprintf("pod %s: container %s restarted %d times%s; its warning events: %s; the end of its log: %s", p.Name, cs.Name, cs.RestartCount, last,
					events, previousLog(p, cs, 3))
			case cs.State.Running != nil && !cs.Ready && time.Since(cs.State.Running.StartedAt.Time) > time.Minute:
				return fmt.Sprintf("pod %s: container %s running but not Ready for %s; its events: %s", p.Name, cs.Name,
					time.Since(cs.State.Running.StartedAt.Time).Round(time.Second), podEvents(t, p.Name))
			}
		}
	}
	return ""
}

// podEvents are the warning events of a pod, newest last.
func podEvents(t *testing.T, pod string) string {
	events := &corev1.EventList{}
	if err := cluster.kube.List(context.Background(), events, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == pod && e.Type == corev1.EventTypeWarning && e.Reason != "MissingClusterDNS" {
			out = append(out, fmt.Sprintf("%s: %s (x%d)", e.Reason, e.Message, e.Count))
		}
	}
	return strings.Join(out, "; ")
}

// restricted labels a namespace to enforce the Pod Security Standard
// restricted, at the apiserver's version.
var restricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}

func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := testenv.EnsureNamespace(context.Background(), cluster.kube, name, labels); err != nil {
		t.Fatal(err)
	}
}

// releasePods are the release's pods.
func releasePods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := cluster.kube.List(context.Background(), pods, client.InNamespace(namespace),
		client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// readyPods are the release's pods that are Ready and not terminating.
func readyPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	for _, p := range releasePods(t) {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out
}

// podReport says, for a failure message, where each of the release's pods
// stands: phase, conditions, container states, warning events and the end
// of each container's log.
func podReport(t *testing.T) string {
	var b strings.Builder
	for _, p := range releasePods(t) {
		fmt.Fprintf(&b, "pod %s (%s): %s", p.Name, p.Status.PodIP, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		}
		b.WriteString("\n")
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s: ready=%v restarts=%d state=%+v last=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
		}
		fmt.Fprintf(&b, "  warning events: %s\n", podEvents(t, p.Name))
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				fmt.Fprintf(&b, "  the previous container's log:\n%s\n", previousLog(p, cs, 20))
			}
		}
		lines := int64(20)
		logs, err := cluster.clientset.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(context.Background())
		fmt.Fprintf(&b, "  log (%v):\n%s\n", err, strings.TrimSpace(string(logs)))
	}
	return b.String()
}

// previousLog is the end of the log of a container's previous run, read
// from the kubelet's log directory: right after a restart, the kubelet may
// not serve it yet.
func previousLog(p corev1.Pod, cs corev1.ContainerStatus, lines int) string {
	path := cluster.path("pod-logs", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), cs.Name, fmt.Sprintf("%d.log", cs.RestartCount-1))
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	for i, l := range all {
		// CRI log lines: time, stream, tag, message.
		if f := strings.SplitN(l, " ", 4); len(f) == 4 {
			all[i] = f[3]
		}
	}
	return strings.Join(all, "\n")
}

// warningClient is an admin client that records the apiserver's warnings.
func warningClient(t *testing.T) (client.Client, *testenv.Warnings) {
	t.Helper()
	w := &testenv.Warnings{}
	cfg := rest.CopyConfig(cluster.config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: cluster.kube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// lbService is a private-only LoadBalancer Service that asks for the pool.
func lbService(name string) *corev1.Service {
	return fixtures.PrivateService(optedIn, name, map[string]string{request.AnnotationPool: "dc-link"})
}

// leader waits for the sweeper's Lease to be held by a Ready pod of the
// release other than not (a pod name, or ""), and returns that pod's name.
// The identity is the pod's hostname, its name, then "_" and a suffix.
func leader(t *testing.T, not string, timeout time.Duration) string {
	t.Helper()
	var holder, name string
	eventually(t, timeout, "a Ready pod other than "+not+" to hold the sweeper's Lease", func() bool {
		lease := &coordinationv1.Lease{}
		if err := cluster.kube.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: sweeper.LeaseName}, lease); err != nil || lease.Spec.HolderIdentity == nil {
			return false
		}
		holder = *lease.Spec.HolderIdentity
		for _, p := range readyPods(t) {
			if p.Name != not && strings.HasPrefix(holder, p.Name+"_") {
				name = p.Name
				return true
			}
		}
		return false
	})
	return name
}
