package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// The node's network, inside the run's network namespace. Nothing routes
// out of it: the default route is unreachable, so a packet for the Service
// CIDR that no DNAT rule catches (the apiserver dialing a webhook's
// ClusterIP without aggregator routing) fails at once instead of leaving.
const (
	bridgeName          = "e2e0"
	nodeIP              = "10.244.0.1"
	podCIDR             = "10.244.0.0/24"
	serviceCIDR         = "10.96.0.0/16"
	kubernetesServiceIP = "10.96.0.1"
	apiserverPort       = "6443"
	nodeName            = "e2e-node"
	// pauseImage is the sandbox image, built here: none can be pulled.
	pauseImage = "localhost/scw-lb-ipam-e2e/pause:1"
	// forgerImage runs testdata/forger, built here too.
	forgerImage = "localhost/scw-lb-ipam-e2e/forger:1"
	// imageRepository is the chart's image.repository, the name make image
	// gives the layout's index.
	imageRepository = "ghcr.io/scw-lb-ipam/scw-lb-ipam"
	// mntnsFile, in the run's directory, holds the node side's mount
	// namespace inode for the host side's leftover check.
	mntnsFile = "node.mntns"
)

// hiddenHostDirs are the host directories where a node writes outside the
// paths its flags set (the kubelet's device-plugin socket and
// /var/log/containers links, runc's and the CNI plugins' state, containerd's
// shim sockets): inside the mount namespace, each is covered by a directory
// of the run's.
var hiddenHostDirs = []string{"/run", "/var/lib", "/var/log"}

var repoRoot = mustAbs("../..")

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// node is the single-node cluster: its processes in start order, the admin
// credentials, and clients.
type node struct {
	dir        string
	cgroup     string
	pki        *pki
	kubeconfig string
	config     *rest.Config
	kube       client.Client
	clientset  *kubernetes.Clientset
	ctrSock    string
	procs      map[string]*proc
	order      []string
	// imageRef is the project's image by digest, as the chart runs it.
	imageRef string
	digest   string
}

func (n *node) bin(name string) string { return filepath.Join(repoRoot, "bin", name) }
func (n *node) path(p ...string) string {
	return filepath.Join(append([]string{n.dir}, p...)...)
}

// startNode brings the cluster up to a Ready node with both images
// imported. On error, what started is stopped.
func startNode(dir, cgroup string) (n *node, err error) {
	n = &node{dir: dir, cgroup: cgroup, procs: map[string]*proc{}, ctrSock: filepath.Join(dir, "containerd.sock")}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	began := time.Now()
	if err := os.MkdirAll(n.path("logs"), 0o755); err != nil {
		return n, err
	}
	if err := hideHostDirs(n.path("hidden")); err != nil {
		return n, err
	}
	if err := setupNetwork(); err != nil {
		return n, err
	}
	if n.pki, err = newPKI(n.path("pki")); err != nil {
		return n, err
	}
	n.kubeconfig = n.path("admin.kubeconfig")
	if err := n.pki.kubeconfig(n.kubeconfig, "https://"+nodeIP+":"+apiserverPort); err != nil {
		return n, err
	}
	if err := n.startControlPlane(); err != nil {
		return n, err
	}
	controlPlane := time.Since(began)
	t := time.Now()
	if err := n.startContainerd(); err != nil {
		return n, err
	}
	if err := n.importImages(); err != nil {
		return n, err
	}
	images := time.Since(t)
	t = time.Now()
	if err := n.startControllers(); err != nil {
		return n, err
	}
	if err := n.startKubelet(); err != nil {
		return n, err
	}
	fmt.Printf("e2e: node Ready in %s (etcd and kube-apiserver %s, containerd and the images %s, controllers and kubelet %s)\n",
		time.Since(began).Round(100*time.Millisecond), controlPlane.Round(100*time.Millisecond),
		images.Round(100*time.Millisecond), time.Since(t).Round(100*time.Millisecond))
	return n, nil
}

// hideHostDirs covers each of hiddenHostDirs with a directory under dir, in
// this mount namespace only.
func hideHostDirs(dir string) error {
	for _, d := range hiddenHostDirs {
		src := filepath.Join(dir, d)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(src, d, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s over %s: %w", src, d, err)
		}
	}
	return nil
}

// setupNetwork makes the node's bridge, its unreachable default route, and
// the DNAT that takes pods to the apiserver at the kubernetes Service's
// address (there is no kube-proxy; the apiserver dials webhook endpoints
// itself, --enable-aggregator-routing). The node's own processes use the
// bridge address: for them the Service's address has no route.
func setupNetwork() error {
	dnat := []string{"-d", kubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", nodeIP + ":" + apiserverPort}
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", bridgeName, "type", "bridge"},
		{"ip", "addr", "add", nodeIP + "/24", "dev", bridgeName},
		{"ip", "link", "set", bridgeName, "up"},
		{"ip", "route", "add", "unreachable", "default"},
		append([]string{"iptables", "-t", "nat", "-A", "PREROUTING"}, dnat...),
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	// This namespace's own setting: pods' packets to the apiserver are
	// routed through the bridge's address.
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

// startControlPlane starts etcd and kube-apiserver and waits for /readyz.
func (n *node) startControlPlane() error {
	if _, err := n.start("etcd", n.bin("etcd"),
		"--data-dir", n.path("etcd"), "--unsafe-no-fsync",
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "default=http://127.0.0.1:2380", "--log-level", "warn"); err != nil {
		return err
	}
	p := n.pki.path
	apiserver, err := n.start("kube-apiserver", n.bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port="+apiserverPort, "--advertise-address="+nodeIP,
		"--tls-cert-file="+p(apiserverPair+".crt"), "--tls-private-key-file="+p(apiserverPair+".key"),
		"--client-ca-file="+p(caFile),
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate="+p(adminPair+".crt"), "--kubelet-client-key="+p(adminPair+".key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p(saPubFile), "--service-account-signing-key-file="+p(saKeyFile),
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		// The apiserver calls webhooks at their Service's endpoints, as
		// no kube-proxy runs here to carry the ClusterIP.
		"--enable-aggregator-routing=true",
		"--profiling=false")
	if err != nil {
		return err
	}
	if n.config, err = clientcmd.BuildConfigFromFlags("", n.kubeconfig); err != nil {
		return err
	}
	n.config.QPS, n.config.Burst = 100, 200
	// The tests read the warnings they expect through their own handler.
	n.config.WarningHandler = rest.NoWarnings{}
	if n.clientset, err = kubernetes.NewForConfig(n.config); err != nil {
		return err
	}
	if n.kube, err = client.New(n.config, client.Options{Scheme: fixtures.Scheme()}); err != nil {
		return err
	}
	return n.waitFor("kube-apiserver /readyz", 90*time.Second, apiserver, func(ctx context.Context) (bool, error) {
		body, err := n.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// containerdConfig keeps every path of containerd and runc under the run's
// directory. restrict_oom_score_adj: this VM withholds CAP_SYS_RESOURCE,
// and without it runc fails every sandbox with "can't get final child's
// PID from pipe: EOF" when the CRI asks for the kubelet's -998.
const containerdConfig = `version = 2
root = "{{dir}}/containerd/root"
state = "{{dir}}/containerd/state"
[grpc]
  address = "{{sock}}"
[ttrpc]
  address = "{{sock}}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{dir}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + cniBinDir + `"
    conf_dir = "{{dir}}/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{{dir}}/certs.d"
`

// cniConfig is the pods' network: the node's bridge, with its address as
// their gateway, and addresses from podCIDR.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "e2e",
  "plugins": [
    {"type": "bridge", "bridge": "` + bridgeName + `", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + podCIDR + `", "gateway": "` + nodeIP + `"}]],
              "dataDir": "{{dir}}/cni-ipam"}},
    {"type": "loopback"}
  ]
}
`

func (n *node) render(tmpl string) string {
	return strings.NewReplacer("{{dir}}", n.dir, "{{sock}}", n.ctrSock, "{{pause}}", pauseImage).Replace(tmpl)
}

func (n *node) startContainerd() error {
	if err := os.MkdirAll(n.path("cni"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(n.path("cni", "10-e2e.conflist"), []byte(n.render(cniConfig)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(n.path("containerd.toml"), []byte(n.render(containerdConfig)), 0o644); err != nil {
		return err
	}
	containerd, err := n.start("containerd", "containerd", "--config", n.path("containerd.toml"))
	if err != nil {
		return err
	}
	return n.waitFor("containerd", 30*time.Second, containerd, func(context.Context) (bool, error) {
		return exec.Command("ctr", "--address", n.ctrSock, "version").Run() == nil, nil
	})
}

// ctr runs ctr on the node's containerd, in the CRI's namespace.
func (n *node) ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", n.ctrSock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// importImages imports the sandbox image it builds and the project's image
// from make image's OCI layout, whose index digest the chart runs.
func (n *node) importImages() error {
	for _, p := range []struct{ pkg, ref, user string }{
		{"pause", pauseImage, "65535:65535"},
		{"forger", forgerImage, "65532:65532"},
	} {
		file, err := n.buildProgramImage(p.pkg, p.ref, p.user)
		if err != nil {
			return err
		}
		if _, err := n.ctr("images", "import", file); err != nil {
			return err
		}
	}
	var err error
	n.digest, n.imageRef, err = n.importLayout(filepath.Join(repoRoot, "bin", "image"))
	return err
}

// importLayout imports the image of make image's output dir (its oci
// layout and index.digest) and returns its digest and the reference the
// CRI finds it by, REPOSITORY@DIGEST.
func (n *node) importLayout(dir string) (digest, ref string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "index.digest"))
	if err != nil {
		return "", "", err
	}
	digest = strings.TrimSpace(string(b))
	layout := n.path(strings.ReplaceAll(digest, ":", "-") + ".tar")
	if err := tarDir(filepath.Join(dir, "oci"), layout); err != nil {
		return "", "", err
	}
	// The layout names its index REPOSITORY:VERSION: the image is stored
	// under that name with the index as its target, so the CRI finds it as
	// REPOSITORY@DIGEST too.
	out, err := n.ctr("images", "import", "--all-platforms", layout)
	if err != nil {
		return "", "", err
	}
	list, err := n.ctr("images", "list")
	if err != nil {
		return "", "", err
	}
	stored := ""
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == digest {
			stored = f[0]
		}
	}
	if stored == "" {
		return "", "", fmt.Errorf("ctr images import of %s/oci stored no image with the index digest %s: import said %q; images:\n%s", dir, digest, out, list)
	}
	// The CRI finds an image by digest only under a record of that name,
	// which its own pulls make and an import does not. The name the import
	// gave (REPOSITORY:VERSION) goes: two versions may share it.
	ref = imageRepository + "@" + digest
	if _, err := n.ctr("images", "tag", stored, ref); err != nil {
		return "", "", err
	}
	_, err = n.ctr("images", "rm", stored)
	return digest, ref, err
}

// buildProgramImage builds testdata/<pkg> static and writes a docker
// tarball of the one-layer image ref that runs it as user.
func (n *node) buildProgramImage(pkg, ref, user string) (string, error) {
	bin := n.path(pkg)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./test/e2e/testdata/"+pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the %s program: %w: %s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: pkg, Mode: 0o755, Size: int64(len(data))}); err != nil {
		return "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	b := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	cf.Config = v1.Config{Entrypoint: []string{"/" + pkg}, User: user}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", err
	}
	out := n.path(pkg + ".tar")
	return out, tarball.WriteToFile(out, tag, img)
}

// tarDir writes dir's files into a tar archive, the form ctr imports an
// OCI layout from.
func tarDir(dir, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// startControllers starts kube-controller-manager (ServiceAccounts,
// kube-root-ca.crt, Deployments, EndpointSlices, the PDB's status, garbage
// collection) and kube-scheduler.
func (n *node) startControllers() error {
	k := n.kubeconfig
	if _, err := n.start("kube-controller-manager", n.bin("kube-controller-manager"),
		"--kubeconfig="+k, "--authentication-kubeconfig="+k, "--authorization-kubeconfig="+k,
		"--bind-address=127.0.0.1", "--secure-port=10257", "--cert-dir="+n.path("kube-controller-manager"),
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--service-account-private-key-file="+n.pki.path(saKeyFile), "--root-ca-file="+n.pki.path(caFile),
		"--service-cluster-ip-range="+serviceCIDR, "--allocate-node-cidrs=false"); err != nil {
		return err
	}
	_, err := n.start("kube-scheduler", n.bin("kube-scheduler"),
		"--kubeconfig="+k, "--authentication-kubeconfig="+k, "--authorization-kubeconfig="+k,
		"--bind-address=127.0.0.1", "--secure-port=10259", "--cert-dir="+n.path("kube-scheduler"),
		"--leader-elect=false")
	return err
}

// kubeletConfig: cgroup v1 (this machine's) needs failCgroupV1: false. No
// eviction or image garbage collection: the imported images cannot be
// pulled again. resolvConf empty: pods get no DNS (they need none: the
// apiserver and the emulator are reached by address).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {{cgroup}}
containerRuntimeEndpoint: unix://{{sock}}
address: ` + nodeIP + `
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: {{ca}}}
authorization:
  mode: AlwaysAllow
failSwapOn: false
resolvConf: ""
volumePluginDir: {{dir}}/kubelet-plugins
podLogsDir: {{dir}}/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
`

func (n *node) startKubelet() error {
	cfg := strings.NewReplacer("{{cgroup}}", n.cgroup, "{{ca}}", n.pki.path(caFile)).Replace(n.render(kubeletConfig))
	if err := os.WriteFile(n.path("kubelet.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	kubelet, err := n.start("kubelet", n.bin("kubelet"),
		"--config="+n.path("kubelet.yaml"), "--kubeconfig="+n.kubeconfig, "--root-dir="+n.path("kubelet"),
		"--hostname-override="+nodeName, "--node-ip="+nodeIP)
	if err != nil {
		return err
	}
	if err := n.waitFor("the node to be Ready", 2*time.Minute, kubelet, func(ctx context.Context) (bool, error) {
		node := &corev1.Node{}
		if err := n.kube.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	// The kubelet only warns about a field it does not know, and would run
	// with that setting's default (a pod log directory on the host).
	log, err := os.ReadFile(kubelet.log)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "unknown field") {
			return fmt.Errorf("the kubelet ignores a field of %s: %s", n.path("kubelet.yaml"), line)
		}
	}
	return nil
}

// stop tears the node down: the workloads through the kubelet (so that
// their sandboxes, networks and volumes go as in a cluster), then the
// kubelet and the controllers, what containerd still holds, containerd,
// and the control plane. It reports what it had to force.
func (n *node) stop() {
	began := time.Now()
	if n.kube != nil && n.procs["kubelet"].running() && n.procs["kube-apiserver"].running() {
		if err := n.drain(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: draining the node:", err)
		}
	}
	for _, name := range []string{"kubelet", "kube-scheduler", "kube-controller-manager"} {
		n.procs[name].stop(10 * time.Second)
	}
	if n.procs["containerd"].running() {
		n.removeContainers()
	}
	n.procs["containerd"].stop(10 * time.Second)
	for _, name := range []string{"kube-apiserver", "etcd"} {
		n.procs[name].stop(15 * time.Second)
	}
	// containerd's shims outlive it by design: any left in this mount
	// namespace are the run's.
	self := nsInode("/proc/self/ns/mnt")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscan(filepath.Base(d), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		if nsInode(filepath.Join(d, "ns", "mnt")) == self {
			cmd, _ := os.ReadFile(filepath.Join(d, "cmdline"))
			fmt.Fprintf(os.Stderr, "e2e: stopping %d, left after containerd: %s\n", pid, strings.ReplaceAll(string(cmd), "\x00", " "))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	fmt.Printf("e2e: node stopped in %s\n", time.Since(began).Round(100*time.Millisecond))
}

// drain deletes every workload and pod and waits until the kubelet has
// stopped them all and the apiserver has none left.
func (n *node) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}, &batchv1.JobList{}, &appsv1.ReplicaSetList{}} {
		if err := n.kube.List(ctx, list); err != nil {
			return err
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, o := range items {
			_ = client.IgnoreNotFound(n.kube.Delete(ctx, o.(client.Object), client.PropagationPolicy("Background")))
		}
	}
	pods := &corev1.PodList{}
	if err := n.kube.List(ctx, pods); err != nil {
		return err
	}
	for i := range pods.Items {
		_ = client.IgnoreNotFound(n.kube.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(2)))
	}
	return n.waitFor("the pods to be gone", 2*time.Minute, n.procs["kubelet"], func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := n.kube.List(ctx, pods); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
}

// removeContainers kills and removes what containerd still runs (exited
// sandboxes the kubelet had not collected yet), so that their shims exit.
func (n *node) removeContainers() {
	out, err := n.ctr("tasks", "list", "--quiet")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	}
	for _, id := range strings.Fields(out) {
		_, _ = n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
		_, _ = n.ctr("tasks", "delete", "--force", id)
	}
	out, _ = n.ctr("containers", "list", "--quiet")
	for _, id := range strings.Fields(out) {
		if _, err := n.ctr("containers", "delete", id); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
	}
}
