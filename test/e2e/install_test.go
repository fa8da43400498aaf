package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/testenv"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/sweeper"
)

// The release, as the README installs it.
const (
	release   = "scw-lb-ipam"
	namespace = "scw-lb-ipam"
	// poolRange is the pool's range in the "dc" network.
	poolRange = "172.16.35.10-172.16.35.20"
)

// installation is a release of the chart on the node, with the emulator
// it talks to.
type installation struct {
	emu    *ipamtest.Server
	pns    map[string]ipamtest.PrivateNetwork
	values string
}

// install starts the emulator on the bridge (where the pods reach it:
// never 127.0.0.1, which is each pod's own) and runs helm install --wait
// with the image by digest, self-managed TLS and two replicas; sets are
// extra --set flags.
func install(t *testing.T, sets ...string) *installation {
	t.Helper()
	in := &installation{emu: ipamtest.New(ipamtest.Options{SecretKey: testenv.SecretKey})}
	url, err := in.emu.Start(nodeIP + ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.emu.Close() })
	if in.pns, err = in.emu.AddPrivateNetworks("nodes=172.16.0.0/22", "dc=172.16.32.0/22"); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, "payments", map[string]string{ccm.LabelEnabled: "true"})
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
    - {name: dc-link, privateNetworkID: %s, ranges: [%q], namespaces: [payments]}
scaleway:
  accessKey: %s
  secretKey: %s
  projectID: %s
  apiURL: %s
`, cluster.digest, in.pns["nodes"].ID, in.pns["dc"].ID, poolRange, testenv.AccessKey, testenv.SecretKey, ipamtest.DefaultProjectID, url), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", release, filepath.Join(repoRoot, "charts", "scw-lb-ipam"), "--namespace", namespace, "--create-namespace",
		"--values", in.values, "--wait", "--timeout", "3m"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	began := time.Now()
	if out, err := helm(t, args...); err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, podReport(t))
	}
	t.Logf("helm install --wait: %s", time.Since(began).Round(100*time.Millisecond))
	t.Cleanup(func() {
		if out, err := helm(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	return in
}

// helm runs bin/helm on the node's cluster, with a private home.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(cluster.bin("helm"), append(args, "--kubeconfig", cluster.kubeconfig)...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := cluster.kube.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
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

// podReport says, for a failure message, where each of the release's pods
// stands: phase, conditions, container states, the namespace's warning
// events and the end of each container's log.
func podReport(t *testing.T) string {
	ctx := context.Background()
	var b strings.Builder
	for _, p := range releasePods(t) {
		fmt.Fprintf(&b, "pod %s: %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		}
		b.WriteString("\n")
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s: ready=%v restarts=%d state=%+v last=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
		}
		logs, err := cluster.clientset.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr(int64(20))}).DoRaw(ctx)
		fmt.Fprintf(&b, "  log (%v):\n%s\n", err, logs)
	}
	events := &corev1.EventList{}
	if err := cluster.kube.List(ctx, events, client.InNamespace(namespace)); err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "event %s %s: %s: %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

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
func lbService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{ccm.AnnotationPool: "dc-link", ccm.AnnotationPrivate: "true"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
}

// TestInstall: helm install --wait brings both pods Ready under the
// kubelet (the image's entrypoint, user, read-only root and memory
// emptyDir, the probes, the projected token); the apiserver calls the
// webhook at the Service's endpoints over the self-managed TLS, so a
// Service in an opted-in namespace gets its address, with the warning that
// says so; and exactly one pod leads the sweeper.
func TestInstall(t *testing.T) {
	ctx := context.Background()
	in := install(t)

	pods := releasePods(t)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2\n%s", len(pods), podReport(t))
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if got := p.Spec.Containers[0].Image; got != cluster.imageRef {
			t.Errorf("pod %s runs %s, want the image by digest %s", p.Name, got, cluster.imageRef)
		}
		if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("pod %s not Ready at its first start: %+v", p.Name, p.Status.ContainerStatuses)
		}
	}

	c, w := warningClient(t)
	svc := lbService("payments", "api")
	began := time.Now()
	if err := c.Create(ctx, svc); err != nil {
		t.Fatalf("creating a Service through the webhook: %v\n%s", err, podReport(t))
	}
	t.Logf("first admission through the Service's endpoints: %s", time.Since(began).Round(time.Millisecond))
	got := &corev1.Service{}
	if err := cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
		t.Fatal(err)
	}
	addr, id := got.Annotations[ccm.AnnotationAddresses], got.Annotations[ccm.AnnotationPrivateIPIDs]
	ip, booked := in.emu.IP(id)
	if !booked || !strings.HasPrefix(addr, "172.16.35.") || strings.Split(ip.Address.String(), "/")[0] != addr {
		t.Fatalf("Service not given its address: annotations %v (booked in the emulator: %v)", got.Annotations, booked)
	}
	if want := in.pns["nodes"].ID + "," + in.pns["dc"].ID; got.Annotations[ccm.AnnotationPNIDs] != want {
		t.Errorf("pn-ids %q, want %q", got.Annotations[ccm.AnnotationPNIDs], want)
	}
	if want := fmt.Sprintf("scw-lb-ipam: reserved %s (IPAM ID %s) from pool dc-link", addr, id); !slices.Equal(w.List(), []string{want}) {
		t.Errorf("warnings %q, want %q", w.List(), want)
	}
	if err := cluster.kube.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}

	// Exactly one pod leads: the Lease names one of them (the identity is
	// the pod's hostname, its name, and a suffix).
	lease := &coordinationv1.Lease{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cluster.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sweeper.LeaseName}, lease)
		if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod holds the sweeper's Lease after 30s (%v)\n%s", err, podReport(t))
		}
		time.Sleep(250 * time.Millisecond)
	}
	holder := *lease.Spec.HolderIdentity
	leaders := 0
	for _, n := range names {
		if strings.HasPrefix(holder, n+"_") {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("the sweeper's Lease is held by %q, want one of the pods %v", holder, names)
	}
}
