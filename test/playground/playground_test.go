package playground_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/playground"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// TestMakeRun drives make run's entry point like a newcomer: start it, apply
// the example Service, read its annotations and the warning, run status,
// then Ctrl-C and check nothing is left behind.
func TestMakeRun(t *testing.T) {
	root, _ := filepath.Abs("../..")
	for _, b := range []string{"kube-apiserver", "etcd", "helm"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			t.Fatalf("bin/%s is missing: run make tools (make test does)", b)
		}
	}
	bins := t.TempDir()
	build := exec.Command("go", "build", "-o", bins+"/", "./cmd/scw-playground", "./cmd/scw-lb-ipam")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(filepath.Join(bins, "scw-playground"), "-root", root)
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stopped := false
	defer func() {
		if !stopped { // the test failed midway: still stop it, then kill
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
	}()

	// Read the banner until the ready line and the commands after it.
	banner := make(chan string, 1)
	var out bytes.Buffer
	var outMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			outMu.Lock()
			out.WriteString(sc.Text() + "\n")
			text := out.String()
			outMu.Unlock()
			if !sent && strings.Contains(text, "Ctrl-C stops everything") {
				banner <- text
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var text string
	select {
	case text = <-banner:
	case err := <-exited:
		t.Fatalf("make run's entry point exited: %v\n%s\n%s", err, out.String(), logs.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("no ready banner within 3 minutes:\n%s", out.String())
	}
	if !strings.Contains(text, playground.ReadyLine) {
		t.Fatalf("banner without %q:\n%s", playground.ReadyLine, text)
	}
	kubeconfig := match(t, text, `KUBECONFIG\s+(\S+)`)
	tmp := match(t, text, `removes (\S+)\.`)
	statusLine := match(t, text, `(SCW_API_URL=.*bin/scw-lb-ipam status .*)`)

	// kubectl apply -f examples/service.yaml, with client-go.
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	seen := &testenv.Warnings{}
	restCfg.WarningHandler = seen
	kube, err := client.New(restCfg, client.Options{Scheme: fixtures.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	svc := readService(t, root, "service.yaml")
	if err := kube.Create(context.Background(), svc); err != nil {
		t.Fatalf("applying examples/service.yaml: %v\n%s", err, logs.String())
	}
	got := &corev1.Service{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(svc), got); err != nil {
		t.Fatal(err)
	}
	addr, id := got.Annotations[request.AnnotationAddresses], got.Annotations[ccm.AnnotationPrivateIPIDs]
	if addr != "172.16.4.200" || id == "" {
		t.Fatalf("annotations: %v", got.Annotations)
	}
	want := fmt.Sprintf("scw-lb-ipam: reserved %s (IPAM ID %s) from pool dc-link", addr, id)
	if got := seen.List(); len(got) != 1 || got[0] != want {
		t.Fatalf("warnings %q, want %q", got, want)
	}

	// The banner's metrics URL: plain HTTP on the loopback, the pool gauge
	// counting the reservation.
	metricsURL := match(t, text, `metrics\s+(http://\S+)`)
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("GET %s: %v", metricsURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `scw_lb_ipam_pool_addresses{pool="dc-link",state="used_by_cluster"} 1`) {
		t.Fatalf("GET %s: %s, without the dc-link pool gauge:\n%.2000s", metricsURL, resp.Status, body)
	}

	// The real Scaleway CCM, named with its log in the banner, makes the
	// Load Balancer with the reserved address.
	if !strings.Contains(text, "the Scaleway cloud-controller-manager v0.36") {
		t.Fatalf("the banner does not name the CCM that runs:\n%s", text)
	}
	ccmLog := match(t, text, `CCM log\s+(\S+)`)
	made := func() bool {
		if err := kube.Get(context.Background(), client.ObjectKeyFromObject(svc), got); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(got.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == addr })
	}
	if !localrun.Poll(30*time.Second, 200*time.Millisecond, made) {
		t.Fatalf("no Load Balancer with %s after 30s: status %+v; the CCM's log %s:\n%s", addr, got.Status, ccmLog, mustRead(t, ccmLog))
	}

	// The bring-your-own example, as written: its IP is booked.
	byo := readService(t, root, "service-byo.yaml")
	if err := kube.Create(context.Background(), byo); err != nil {
		t.Fatalf("applying examples/service-byo.yaml: %v", err)
	}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(byo), byo); err != nil {
		t.Fatal(err)
	}
	if ids := byo.Annotations[ccm.AnnotationPrivateIPIDs]; ids != playground.ExampleBYOID {
		t.Fatalf("examples/service-byo.yaml got private-ip-ids %q, want %s", ids, playground.ExampleBYOID)
	}

	// The logs went to the file the banner names, not over the banner.
	logFile := match(t, text, `logs\s+(\S+)`)
	if b := mustRead(t, logFile); !strings.Contains(string(b), "webhook") {
		t.Fatalf("%s holds no webhook log:\n%s", logFile, b)
	}
	outMu.Lock()
	printed := out.String()
	outMu.Unlock()
	if strings.Contains(printed, "INFO") || strings.Contains(printed, "ERROR") {
		t.Fatalf("log lines on the terminal:\n%s", printed)
	}

	// The status command printed in the banner, as JSON.
	fields := strings.Fields(statusLine)
	var env []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env = append(env, fields[0])
		fields = fields[1:]
	}
	if fields[0] != "bin/scw-lb-ipam" {
		t.Fatalf("status command %q", statusLine)
	}
	status := exec.Command(filepath.Join(bins, "scw-lb-ipam"), append(fields[1:], "-o", "json")...)
	status.Env = append(os.Environ(), env...)
	report, err := status.Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var doc struct {
		Pools []inventory.PoolReport `json:"pools"`
	}
	if err := json.Unmarshal(report, &doc); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, report)
	}
	found := false
	for _, p := range doc.Pools {
		for _, a := range p.Addresses {
			found = found || (a.IPID == id && strings.HasPrefix(a.Holder, "Service demo/api, attached to lb_server ") && a.Address.String() == addr)
		}
	}
	if !found {
		t.Fatalf("status does not show %s held by Service demo/api:\n%s", addr, report)
	}

	// The apiserver's and etcd's ports, to check they are gone after.
	apiserverPort := match(t, string(mustRead(t, kubeconfig)), `server: https://127\.0\.0\.1:(\d+)`)

	// Ctrl-C.
	stopped = true
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after Ctrl-C: %v\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("still running 60s after Ctrl-C")
	}
	// Nothing logged over the terminal either (client-go's klog included).
	if strings.TrimSpace(logs.String()) != "" {
		t.Fatalf("make run wrote to stderr:\n%s", logs.String())
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("%s is left behind (%v)", tmp, err)
	}
	if p := processWith("--secure-port=" + apiserverPort); p != "" {
		t.Fatalf("kube-apiserver still running: %s", p)
	}
	if p := processWith(filepath.Base(tmp)); p != "" {
		t.Fatalf("a process of the playground is still running: %s", p)
	}
}

func readService(t *testing.T, root, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := yaml.UnmarshalStrict(mustRead(t, filepath.Join(root, "examples", name)), svc); err != nil {
		t.Fatalf("examples/%s: %v", name, err)
	}
	return svc
}

func match(t *testing.T, text, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in:\n%s", expr, text)
	}
	return m[1]
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// processWith returns the command line of a running process containing s.
func processWith(s string) string {
	entries, _ := os.ReadDir("/proc")
	self := fmt.Sprint(os.Getpid())
	for _, e := range entries {
		if e.Name() == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, s) {
			return cmdline
		}
	}
	return ""
}
