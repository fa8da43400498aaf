package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestInstall: helm install --wait brings both pods Ready under the
// kubelet (the image's entrypoint, user, read-only root and memory
// emptyDir, the probes, the projected token); the apiserver calls the
// webhook at the Service's endpoints over the self-managed TLS, so a
// Service in an opted-in namespace gets its address, with the warning that
// says so; and exactly one pod leads the sweeper.
func TestInstall(t *testing.T) {
	ctx := context.Background()
	// A cycle every 5 s: the view (checkView) shows at the next one.
	in := install(t, "sweeper.interval=5s")

	pods := releasePods(t)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2\n%s", len(pods), podReport(t))
	}
	for _, p := range pods {
		if got := p.Spec.Containers[0].Image; got != cluster.imageRef {
			t.Errorf("pod %s runs %s, want the image by digest %s", p.Name, got, cluster.imageRef)
		}
		if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("pod %s not Ready at its first start: %+v", p.Name, p.Status.ContainerStatuses)
		}
	}

	for _, p := range pods {
		checkContainerProcess(t, p)
	}
	checkRestricted(t)

	c, w := warningClient(t)
	svc := lbService("api")
	began := time.Now()
	if err := c.Create(ctx, svc); err != nil {
		t.Fatalf("creating a Service through the webhook: %v\n%s", err, podReport(t))
	}
	t.Logf("first admission through the Service's endpoints: %s", time.Since(began).Round(time.Millisecond))
	got := &corev1.Service{}
	if err := cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
		t.Fatal(err)
	}
	addr, id := got.Annotations[request.AnnotationAddresses], got.Annotations[ccm.AnnotationPrivateIPIDs]
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
	// The Scaleway CCM beside kube-controller-manager attaches it to the
	// Service's Load Balancer on the pool's network and lists it in the
	// status, with the kubelet's Node as the backend's server.
	eventually(t, time.Minute, "the CCM to attach "+id+" and list "+addr+" in the status", func() bool {
		ip, _ := in.emu.IP(id)
		return cluster.kube.Get(ctx, client.ObjectKeyFromObject(svc), got) == nil && ip.Resource != nil && ip.Resource.Type == "lb_server" &&
			slices.ContainsFunc(got.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == addr })
	})

	// A public Load Balancer in another zone of the region: the CCM makes
	// it there with a flexible IP of that zone, attaches the reserved
	// address, and the status lists the public IP only (the CCM's rule).
	public := fixtures.Service(optedIn, "public-par2", map[string]string{request.AnnotationPool: "dc-link", "service.beta.kubernetes.io/scw-loadbalancer-zone": "fr-par-2"})
	if err := cluster.kube.Create(ctx, public); err != nil {
		t.Fatalf("creating a public Service in fr-par-2: %v", err)
	}
	if err := cluster.kube.Get(ctx, client.ObjectKeyFromObject(public), got); err != nil {
		t.Fatal(err)
	}
	pid := got.Annotations[ccm.AnnotationPrivateIPIDs]
	var lb emulator.LB
	eventually(t, time.Minute, "the CCM to make public-par2's Load Balancer in fr-par-2 and attach "+pid, func() bool {
		for _, l := range in.emu.LBs() {
			if l.Name == ccmPrefix+string(got.UID) {
				lb = l
			}
		}
		ip, _ := in.emu.IP(pid)
		return lb.ID != "" && len(lb.FlexibleIPs) == 1 && ip.Resource != nil && ip.Resource.ID == lb.ID &&
			cluster.kube.Get(ctx, client.ObjectKeyFromObject(public), got) == nil && len(got.Status.LoadBalancer.Ingress) > 0
	})
	if lb.Zone != "fr-par-2" || !slices.Equal(ingressIPs(got), lb.FlexibleIPs) {
		t.Errorf("public-par2's Load Balancer in %s, status %v, want fr-par-2 and its flexible IP %v only", lb.Zone, ingressIPs(got), lb.FlexibleIPs)
	}

	// Exactly one pod leads: a Lease has one holder, and it must be one
	// of the release's pods.
	t.Logf("the sweeper's leader: %s", leader(t, "", 30*time.Second))

	checkView(t, client.ObjectKeyFromObject(svc), id, addr)
}

func ingressIPs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// TestNothingRoutesOut: the node's network namespace has no way out of the
// machine. Its only links are its loopback, its bridge and the pods'
// veths, and the route lookup (no packet sent) for the Service CIDR
// without a DNAT rule, and for any address beyond the bridge, finds none:
// a Service's virtual IP dialed without aggregator routing fails here and
// never leaves.
func TestNothingRoutesOut(t *testing.T) {
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		link := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		if link != "lo" && link != bridgeName && !strings.HasPrefix(link, "veth") {
			t.Errorf("link %s in the node's network namespace: only lo, %s and the pods' veths belong there", link, bridgeName)
		}
	}
	for _, dst := range []string{"10.96.0.10", "172.16.35.10", "192.0.2.1"} {
		if out, err := exec.Command("ip", "route", "get", dst).CombinedOutput(); err == nil {
			t.Errorf("ip route get %s finds %s; want no route", dst, out)
		}
	}
	if out, err := exec.Command("ip", "route", "get", kubernetesServiceIP).CombinedOutput(); err == nil {
		t.Errorf("ip route get %s finds %s: the kubernetes Service's address must reach the apiserver only through the DNAT rule", kubernetesServiceIP, out)
	}
}

// checkContainerProcess reads the pod's process as the runtime started it:
// the image's entrypoint with the chart's arguments, as uid and gid 65532,
// on a read-only root, its certificates on a memory emptyDir.
func checkContainerProcess(t *testing.T, p corev1.Pod) {
	t.Helper()
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	tasks, err := cluster.ctr("tasks", "list")
	if err != nil {
		t.Fatal(err)
	}
	pid := ""
	for _, line := range strings.Split(tasks, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == id {
			pid = f[1]
		}
	}
	if pid == "" {
		t.Fatalf("pod %s: containerd runs no task %s:\n%s", p.Name, id, tasks)
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join("/proc", pid, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if cmd := strings.Split(read("cmdline"), "\x00"); len(cmd) < 2 || cmd[0] != "/scw-lb-ipam" || cmd[1] != "serve" {
		t.Errorf("pod %s runs %q, want the image's entrypoint /scw-lb-ipam serve", p.Name, cmd)
	}
	status := read("status")
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532\n", "Gid:\t65532\t65532\t65532\t65532\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("pod %s's process: no %q in its status:\n%s", p.Name, strings.TrimSpace(want), status)
		}
	}
	mounts := map[string]string{} // mount point -> "options fstype"
	for _, line := range strings.Split(read("mountinfo"), "\n") {
		if i := strings.Index(line, " - "); i >= 0 {
			f, rest := strings.Fields(line[:i]), strings.Fields(line[i+3:])
			if len(f) > 5 && len(rest) > 0 {
				mounts[f[4]] = f[5] + " " + rest[0]
			}
		}
	}
	if opts := mounts["/"]; !strings.HasPrefix(opts, "ro,") {
		t.Errorf("pod %s's root is mounted %q, want read-only", p.Name, opts)
	}
	if m := mounts["/tmp/k8s-webhook-server/serving-certs"]; !strings.HasPrefix(m, "rw,") || !strings.HasSuffix(m, " tmpfs") {
		t.Errorf("pod %s's certificate directory is mounted %q, want a writable tmpfs (the memory emptyDir)", p.Name, m)
	}
}

// checkRestricted proves the release's namespace enforces the Pod Security
// Standard restricted, so that the release's running pods passed it: the
// apiserver refuses a Pod that only lacks the restricted settings, and
// admits one made of the Deployment's own pod template (both dry runs).
func checkRestricted(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{}
	if err := cluster.kube.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace %s does not enforce restricted: %v", namespace, ns.Labels)
	}
	deploy := &appsv1.Deployment{}
	if err := cluster.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release}, deploy); err != nil {
		t.Fatal(err)
	}
	ours := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "restricted-"}, Spec: *deploy.Spec.Template.Spec.DeepCopy()}
	if err := cluster.kube.Create(ctx, ours, client.DryRunAll); err != nil {
		t.Fatalf("the Deployment's pod template under restricted: %v", err)
	}
	bare := ours.DeepCopy()
	bare.Spec.SecurityContext = nil
	for i := range bare.Spec.Containers {
		bare.Spec.Containers[i].SecurityContext = nil
	}
	err := cluster.kube.Create(ctx, bare, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity \"restricted:latest\"") {
		t.Fatalf("a Pod without the restricted settings in %s: %v; want it refused by PodSecurity restricted", namespace, err)
	}
}
