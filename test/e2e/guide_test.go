package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// The pages whose marked blocks TestGuide runs as written: the install
// guide, and the key rotation of the security page on its install.
const (
	guidePage    = "docs/install.md"
	runMarker    = "<!-- guide: run -->"
	rotationPage = "docs/security.md"
	rotateMarker = "<!-- guide: rotate -->"
	fenceMarker  = "<!-- guide: fence -->"
)

// guideBlocks are the shell blocks of page marked marker, in order, their
// list indentation removed.
func guideBlocks(page, marker string) ([]string, error) {
	var blocks []string
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != marker {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			return nil, fmt.Errorf("line %d: %s is not followed by a ```sh block", i+1, marker)
		}
		indent := lines[i+1][:len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " "))]
		var b strings.Builder
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			b.WriteString(strings.TrimPrefix(lines[j], indent) + "\n")
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: the block is not closed", i+2)
		}
		blocks = append(blocks, b.String())
		i = j
	}
	return blocks, nil
}

// placeholder is a <word> of a copied example that the reader fills in.
var placeholder = regexp.MustCompile(`<[a-z][a-z-]*>`)

// TestGuide runs docs/install.md's quick path as a new user copies it:
// every marked block, as written, with bash, kubectl, helm and jq, in a
// directory that holds the repository's examples. The chart and the image
// are published, as the release workflow publishes them, to CNCF
// Distribution's registry on the node's loopback, which stands in for
// ghcr.io: helm installs the chart from it by --version, and the kubelet
// pulls the image from it. The test stands in for the (cloud) steps only:
// the emulator's Private Networks fill the examples' <placeholders>,
// key.json (a key of scw-lb-ipam's own application, with the page's two
// permission sets on the Project, apart from the CCM's) and PROJECT_ID are
// what scw iam api-key create and the page's line give, and helm gets the
// emulator's API URL. Before the page's uninstall, docs/security.md's fence
// (the NetworkPolicy, then helm test) and key rotation (rotateKey) run on
// that install. The page's blocks run to its
// uninstall, which must leave nothing of the chart's; the page's Service
// must have got its reserved address, and the real CCM must show it in its
// status.
func TestGuide(t *testing.T) {
	blocks, rotation, fence := pageBlocks(t, guidePage, runMarker), pageBlocks(t, rotationPage, rotateMarker), pageBlocks(t, rotationPage, fenceMarker)
	if len(blocks) < 3 {
		t.Fatalf("%s marks %d blocks to run, want the Secret, the install and the Service", guidePage, len(blocks))
	}
	uninstall := slices.IndexFunc(blocks, func(b string) bool { return strings.Contains(b, "helm uninstall") })
	if uninstall < 0 {
		t.Fatalf("%s marks no block with helm uninstall", guidePage)
	}
	emu := newEmulator()
	url, err := emu.Start(nodeIP + ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	pns, err := emu.AddPrivateNetworks("nodes=172.16.0.0/22", "dc=172.16.32.0/22")
	if err != nil {
		t.Fatal(err)
	}
	startCCM(t, url, pns["nodes"].ID)
	reg := startRegistry(t)
	version := reg.publish(t)
	reg.mirror(t)
	dir := userDir(t, map[string]string{
		"<cluster-name>": "e2e", "<cluster-private-network-id>": pns["nodes"].ID, "<pool-private-network-id>": pns["dc"].ID,
	}, url, reg.addr)
	t.Cleanup(func() { removeGuide(t) })
	run := func(page string, blocks []string, first int) {
		for i, block := range blocks {
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+filepath.Join(dir, ".bin")+":"+os.Getenv("PATH"), "KUBECONFIG="+cluster.kubeconfig,
				"HOME="+dir, "PROJECT_ID="+emulator.DefaultProjectID)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			cancel()
			if err != nil {
				t.Fatalf("%s, block %d failed (%v):\n%s\n--- its output:\n%s\n%s", page, first+i+1, err, block, out.String(), podReport(t))
			}
			t.Logf("%s, block %d: %s", page, first+i+1, time.Since(began).Round(100*time.Millisecond))
		}
	}
	run(guidePage, blocks[:uninstall], 0)
	run(rotationPage, fence, 0)
	checkFence(t)
	rotateKey(t, emu, dir, func() { run(rotationPage, rotation, 0) })
	run(guidePage, blocks[uninstall:], uninstall)
	// The pods go once the garbage collector has deleted the ReplicaSet.
	var left []string
	if !localrun.Poll(time.Minute, 250*time.Millisecond, func() bool { left = chartLeftovers(t); return len(left) == 0 }) {
		t.Errorf("a minute after the page's helm uninstall, the chart left %v", left)
	}
	if !reg.pulled() {
		b, _ := os.ReadFile(reg.log)
		t.Errorf("the kubelet's containerd did not pull %s@%s (chart %s) from the registry; its log:\n%s", publishedImage, cluster.digest, version, b)
	}
	svc := &corev1.Service{}
	eventually(t, 2*time.Minute, "the guide's Service demo/api to show its reserved address in its status", func() bool {
		if cluster.kube.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "api"}, svc) != nil {
			return false
		}
		addr := svc.Annotations[request.AnnotationAddresses]
		return addr != "" && slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == addr })
	})
	if !strings.HasPrefix(svc.Annotations[request.AnnotationAddresses], "172.16.35.2") {
		t.Errorf("demo/api reserved %q, want an address of the example's range 172.16.35.200-172.16.35.250", svc.Annotations[request.AnnotationAddresses])
	}
}

// userDir is the directory the guide's commands run in, as a reader's
// clone: the chart, the examples with their placeholders filled in, and
// what the (cloud) steps leave (key.json); .bin holds kubectl and a helm
// that takes ghcr.io's charts from the local registry and adds the
// emulator's API URL to install and upgrade (bash and jq are the host's).
func userDir(t *testing.T, fill map[string]string, apiURL, registryAddr string) string {
	t.Helper()
	dir := t.TempDir()
	examples := filepath.Join(dir, "examples")
	if err := os.Mkdir(examples, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(repoRoot, "examples", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for k, v := range fill {
			text = strings.ReplaceAll(text, k, v)
		}
		// Outside comments, a placeholder left is one this test does not
		// know: the page's reader would have to fill it in too.
		for _, line := range strings.Split(text, "\n") {
			if code, _, _ := strings.Cut(line, "#"); placeholder.MatchString(code) {
				t.Fatalf("examples/%s: %q has a placeholder TestGuide does not fill in", e.Name(), strings.TrimSpace(line))
			}
		}
		if err := os.WriteFile(filepath.Join(examples, e.Name()), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeKeyJSON(t, dir, testenv.WebhookKey(1))
	bin := filepath.Join(dir, ".bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cluster.bin("kubectl"), filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	helm := fmt.Sprintf(`#!/bin/sh
# helm as the reader runs it, with a home of its own; the published chart
# comes from the local registry, and install and upgrade get the
# emulator's API URL.
export HELM_CACHE_HOME=%[1]s HELM_CONFIG_HOME=%[1]s HELM_DATA_HOME=%[1]s
for a in "$@"; do
  shift
  case "$a" in oci://%[4]s/*) a="oci://%[5]s/${a#oci://%[4]s/}" ;; esac
  set -- "$@" "$a"
done
case "$1" in
install|upgrade) exec %[2]s "$@" --plain-http --set scaleway.apiURL=%[3]s ;;
esac
exec %[2]s "$@"
`, filepath.Join(dir, ".helm"), cluster.bin("helm"), apiURL, publishedHost, registryAddr)
	if err := os.WriteFile(filepath.Join(bin, "helm"), []byte(helm), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeKeyJSON leaves in dir what scw iam api-key create -o json writes.
func writeKeyJSON(t *testing.T, dir string, k emulator.Key) {
	t.Helper()
	key, _ := json.Marshal(map[string]string{"access_key": k.AccessKey, "secret_key": k.SecretKey, "default_project_id": emulator.DefaultProjectID})
	if err := os.WriteFile(filepath.Join(dir, "key.json"), key, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pageBlocks reads page's blocks marked marker.
func pageBlocks(t *testing.T, page, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := guideBlocks(string(b), marker)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s marks no block %s", page, marker)
	}
	return blocks
}

// removeGuide uninstalls what the guide installed: the release, the
// namespaces it made, the Service.
func removeGuide(t *testing.T) {
	ctx := context.Background()
	if out, err := helm(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "2m", "--ignore-not-found"); err != nil {
		t.Errorf("helm uninstall: %v\n%s", err, out)
	}
	for _, ns := range []string{"demo", namespace} {
		if err := cluster.kube.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	}
	eventually(t, 2*time.Minute, "namespaces demo and "+namespace+" to be gone", func() bool {
		for _, ns := range []string{"demo", namespace} {
			if !apierrors.IsNotFound(cluster.kube.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})) {
				return false
			}
		}
		return true
	})
}

// chartLeftovers are the objects of the release (its instance label) that
// remain, cluster-wide and in its namespace; the pods' own objects (the
// TLS Secret, Leases) are not the chart's.
func chartLeftovers(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	sel := client.MatchingLabels{"app.kubernetes.io/instance": release}
	var left []string
	for _, list := range []client.ObjectList{
		&corev1.PodList{}, &corev1.ServiceAccountList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{},
		&appsv1.DeploymentList{}, &policyv1.PodDisruptionBudgetList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
		&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &admissionregistrationv1.MutatingWebhookConfigurationList{},
	} {
		if err := cluster.kube.List(ctx, list, sel); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			obj := o.(client.Object)
			if obj.GetDeletionTimestamp() == nil {
				left = append(left, fmt.Sprintf("%T %s/%s", o, obj.GetNamespace(), obj.GetName()))
			}
		}
	}
	return left
}
