package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

func ensureNamespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	if err := testenv.EnsureNamespace(context.Background(), kube, name, labels); err != nil {
		t.Fatal(err)
	}
}

// apply applies a rendered object server-side.
func apply(ctx context.Context, o *unstructured.Unstructured, opts ...client.ApplyOption) error {
	opts = append([]client.ApplyOption{client.FieldOwner("chart-test"), client.ForceOwnership}, opts...)
	return kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), opts...)
}

// TestServerSideDryRun: every object each mode renders is accepted by the
// apiserver, with cert-manager's and prometheus-operator's CRDs installed.
func TestServerSideDryRun(t *testing.T) {
	ensureNamespace(t, namespace, nil)
	ensureNamespace(t, "monitoring", nil) // the overrides' grafanaDashboard.namespace
	ctx := context.Background()
	for _, m := range append(modes, overrides) {
		t.Run(m.name, func(t *testing.T) {
			objs := render(t, []string{m.values})
			if len(objs) < 10 {
				t.Fatalf("only %d objects rendered", len(objs))
			}
			for _, o := range objs {
				if err := apply(ctx, o, client.DryRunAll); err != nil {
					t.Errorf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}

// selfManaged installs the chart's objects in self-managed mode (not the
// Deployment: the binary runs as a local process) with one pool of the
// given range, and returns what startBinary needs.
func selfManaged(t testing.TB, poolRange string) (emu *emulator.Server, objs []*unstructured.Unstructured, args []string, pools, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	emu, values := chartValues(t, poolRange, func(*emulator.Server) string {
		return "scaleway:\n  existingSecret: scaleway-secret\n"
	})
	objs = render(t, []string{values})
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment", "PodDisruptionBudget":
			continue // no kubelet here: the binary runs as a local process
		}
		if o.GetAnnotations()["helm.sh/hook"] != "" {
			continue // helm test's Pod and RBAC exist only while it runs
		}
		if err := apply(ctx, o); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: release + "-tls"}})
	})
	return emu, objs, containerArgs(t, objs), poolFile(t, objs), serviceAccountKubeconfig(t)
}

// emulatorSecretKey is the only secret key the suites' emulators accept.
const emulatorSecretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"

// chartValues makes the release's and an opted-in namespace, an emulator
// with the nodes' network and a pool's, and a values file for one pool of
// the given range over them; scaleway gives the rest of the values (the
// credentials' source, tests.*).
func chartValues(t testing.TB, poolRange string, scaleway func(*emulator.Server) string) (emu *emulator.Server, values string) {
	t.Helper()
	ensureNamespace(t, namespace, nil)
	ensureNamespace(t, "payments", map[string]string{request.LabelEnabled: "true"})
	emu = emulator.NewTestServer(t, emulator.Options{SecretKey: emulatorSecretKey})
	nodes, _ := emu.AddPrivateNetwork("nodes", "172.16.0.0/22")
	dc, _ := emu.AddPrivateNetwork("dc", "172.16.32.0/22")
	values = filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(`config:
  clusterName: e2e
  region: fr-par
  clusterPrivateNetworkID: %s
  pools:
    - {name: dc-link, privateNetworkID: %s, ranges: [%q]}
`, nodes.ID, dc.ID, poolRange)+scaleway(emu)), 0o600); err != nil {
		t.Fatal(err)
	}
	return emu, values
}

// poolFile writes the rendered ConfigMap's pool file where a pod would
// mount it.
func poolFile(t testing.TB, objs []*unstructured.Unstructured) string {
	t.Helper()
	pools := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(pools, []byte(field(t, one(t, objs, "ConfigMap"), "data", "pools.yaml").(string)), 0o600); err != nil {
		t.Fatal(err)
	}
	return pools
}

// routeWebhook has the apiserver's calls to the webhook Service's ClusterIP
// (through the egress proxy) reach p, until the test ends.
func routeWebhook(t testing.TB, p *process) {
	t.Helper()
	webhookSvc := &corev1.Service{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: release}, webhookSvc); err != nil {
		t.Fatal(err)
	}
	svcHost := net.JoinHostPort(webhookSvc.Spec.ClusterIP, "443")
	proxy.Route(svcHost, p.webhookAddr)
	t.Cleanup(func() { proxy.Route(svcHost, "") })
}

// TestSelfManagedEndToEnd starts the binary with the chart's own arguments
// and RBAC (impersonating its ServiceAccount), lets it create its Secret and
// patch the caBundle, and has the apiserver call it over TLS.
func TestSelfManagedEndToEnd(t *testing.T) {
	ctx := context.Background()
	emu, objs, args, pools, kubeconfig := selfManaged(t, "172.16.35.10-172.16.35.20")

	first := startBinary(t, args, pools, kubeconfig, emu.URL())
	routeWebhook(t, first)

	secretKey := client.ObjectKey{Namespace: namespace, Name: release + "-tls"}
	secret := &corev1.Secret{}
	if err := kube.Get(ctx, secretKey, secret); err != nil {
		t.Fatalf("the binary did not create its Secret: %v", err)
	}
	mwc := one(t, objs, "MutatingWebhookConfiguration")
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(mwc.GroupVersionKind())
	if err := kube.Get(ctx, client.ObjectKey{Name: mwc.GetName()}, live); err != nil {
		t.Fatal(err)
	}
	hooks, _, _ := unstructured.NestedSlice(live.Object, "webhooks")
	bundle, _ := hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"].(string)
	if bundle == "" {
		t.Fatal("caBundle not patched")
	}

	// The apiserver calls the webhook over TLS, through the Service name.
	createAndCheck := func(name string) {
		t.Helper()
		svc := fixtures.Service("payments", name, map[string]string{request.AnnotationPool: "dc-link"})
		if err := kube.Create(ctx, svc); err != nil {
			t.Fatalf("creating a Service through the webhook: %v\nlogs:\n%s", err, first.logs.String())
		}
		got := &corev1.Service{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.Annotations[request.AnnotationAddresses], "172.16.35.") || got.Annotations[ccm.AnnotationPrivateIPIDs] == "" {
			t.Fatalf("Service %s not mutated: %v", name, got.Annotations)
		}
	}
	createAndCheck("api")
	checkSecureMetrics(t, first, secret.Data["ca.crt"])

	// A second replica reuses the Secret as it is and serves the same pair.
	second := startBinary(t, args, pools, kubeconfig, emu.URL())
	again := &corev1.Secret{}
	if err := kube.Get(ctx, secretKey, again); err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != secret.ResourceVersion {
		t.Fatal("the second replica rewrote the Secret")
	}
	served, err := os.ReadFile(filepath.Join(second.certDir, "tls.crt"))
	if err != nil || !bytes.Equal(served, again.Data["tls.crt"]) {
		t.Fatalf("the second replica serves another certificate (%v)", err)
	}
	// A rollout stops the first: SIGTERM fails its readiness at once (the
	// endpoint goes), and it keeps answering the apiserver for the chart's
	// shutdown delay, so the admissions still routed to it succeed.
	stopping := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	unready := localrun.Poll(2*time.Second-time.Since(stopping), 50*time.Millisecond, func() bool {
		resp, err := http.Get(first.readyz)
		if err != nil {
			t.Fatalf("readiness probe: %v: the server stopped instead of failing its probe", err)
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusOK
	})
	if !unready {
		t.Fatal("still ready 2s after SIGTERM")
	}
	createAndCheck("api-while-stopping")
	if time.Since(stopping) > 4*time.Second {
		t.Fatalf("the check took %s: past the 5s shutdown delay, it proves nothing", time.Since(stopping))
	}
	// With the first one gone, the second answers the apiserver.
	first.stop(t)
	if waited := time.Since(stopping); waited < 5*time.Second {
		t.Fatalf("stopped %s after SIGTERM, before the 5s shutdown delay", waited)
	}
	routeWebhook(t, second)
	createAndCheck("api-2")

	if strings.Contains(first.logs.String()+second.logs.String(), emulatorSecretKey) {
		t.Fatal("the Scaleway secret key appears in the logs")
	}
}

// checkSecureMetrics: with the chart's arguments and RBAC, the metrics
// endpoint serves HTTPS with the webhook's certificate (verified against
// its CA), HTTP/1.1 only like the webhook port, and answers only callers
// the apiserver authenticates and authorizes through the chart's
// metrics-reader ClusterRole; the process does the TokenReview and
// SubjectAccessReview with the chart's metrics-auth rights. The scrape holds
// every series the chart's alerts and dashboard read.
func checkSecureMetrics(t *testing.T, p *process, caPEM []byte) {
	t.Helper()
	ctx := context.Background()
	clientset, err := kubernetes.NewForConfig(cluster)
	if err != nil {
		t.Fatal(err)
	}
	reader, other, unbind, err := testenv.MetricsTokens(ctx, kube, clientset, release)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unbind)

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA in the TLS Secret")
	}
	// Offers h2 first, as Prometheus and the apiserver may.
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: release + "." + namespace + ".svc", NextProtos: []string{"h2", "http/1.1"}}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: tlsConfig}}
	defer c.CloseIdleConnections()
	get := func(bearer string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+p.metricsAddr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET /metrics (certificate checked against the webhook's CA): %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	if resp, _ := get(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %s, want 401", resp.Status)
	}
	if resp, _ := get(other); resp.StatusCode != http.StatusForbidden {
		t.Errorf("metrics for a ServiceAccount not bound to the reader role: %s, want 403", resp.Status)
	}
	resp, body := get(reader)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `scw_lb_ipam_pool_addresses{pool="dc-link",state="total"}`) {
		t.Errorf("metrics for the reader: %s\n%.500s\nlogs:\n%s", resp.Status, body, p.logs.String())
	}
	checkMonitoredMetricsExported(t, body)
	checkMetricsDocumented(t, body)
	if resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol != "http/1.1" {
		t.Errorf("metrics server negotiated %q (%s), want HTTP/1.1 only", resp.TLS.NegotiatedProtocol, resp.Proto)
	}
	conn, err := tls.Dial("tcp", p.webhookAddr, tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("webhook server negotiated %q, want http/1.1", got)
	}
}

// serviceAccountKubeconfig writes a kubeconfig that impersonates the chart's
// ServiceAccount, so the binary runs with exactly the chart's RBAC.
func serviceAccountKubeconfig(t testing.TB) string {
	return kubeconfig(t, "system:serviceaccount:"+namespace+":"+release,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}

// adminKubeconfig writes the suite's admin kubeconfig.
func adminKubeconfig(t *testing.T) string { return kubeconfig(t, "") }

func kubeconfig(t testing.TB, impersonate string, groups ...string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cluster.Host, CertificateAuthorityData: cluster.CAData}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cluster.CertData, ClientKeyData: cluster.KeyData, Token: cluster.BearerToken,
		Impersonate: impersonate, ImpersonateGroups: groups,
	}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user"}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

type process struct {
	cmd         *exec.Cmd
	logs        *bytes.Buffer
	certDir     string
	webhookAddr string
	metricsAddr string
	readyz      string
	stopped     bool
}

// startBinary runs scw-lb-ipam with the chart's arguments, overriding only
// what a pod gets from its volumes and network namespace: paths and ports.
func startBinary(t testing.TB, chartArgs []string, pools, kubeconfig, apiURL string) *process {
	t.Helper()
	webhookPort, probePort := fixtures.Port(t), fixtures.Port(t)
	p := &process{logs: &bytes.Buffer{}, certDir: t.TempDir(), webhookAddr: "127.0.0.1:" + strconv.Itoa(webhookPort),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(fixtures.Port(t)), readyz: fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)}
	// The credentials Secret's volume, as the kubelet writes it.
	keyDir := t.TempDir()
	for name, v := range map[string]string{"SCW_ACCESS_KEY": emulator.TestAccessKey, "SCW_SECRET_KEY": emulator.TestSecretKey} {
		if err := os.WriteFile(filepath.Join(keyDir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{}, chartArgs...)
	args = append(args, "--config="+pools, "--cert-dir="+p.certDir, "--kubeconfig="+kubeconfig, "--scaleway-key-dir="+keyDir,
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(webhookPort),
		"--metrics-bind-address="+p.metricsAddr, "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort))
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), "POD_NAMESPACE="+namespace, "SCW_API_URL="+apiURL,
		"SCW_ACCESS_KEY="+emulator.TestAccessKey, "SCW_SECRET_KEY="+emulator.TestSecretKey,
		"SCW_DEFAULT_PROJECT_ID="+emulator.DefaultProjectID, "SCW_DEFAULT_REGION=fr-par")
	var logs io.Writer = p.logs
	if testenv.Verbose() {
		logs = io.MultiWriter(p.logs, os.Stderr)
	}
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	ready := false
	localrun.Poll(60*time.Second, 200*time.Millisecond, func() bool {
		if resp, err := http.Get(p.readyz); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		return ready || p.cmd.ProcessState != nil
	})
	if !ready {
		t.Fatalf("scw-lb-ipam did not become ready:\n%s", p.logs.String())
	}
	return p
}

// stop sends SIGTERM, then SIGKILL after ten seconds.
func (p *process) stop(t testing.TB) {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Log("scw-lb-ipam needed SIGKILL")
	}
}

// TestReadmeInstall follows the install guide's steps (docs/install.md) on
// the apiserver: the credentials Secret created from literals with the guide's own
// kubectl command (test values in place of the shell's), then the install
// command, as a server-side dry run, with the production example values,
// which must name that Secret; the Secret carries every key the chart's
// own Secret would. No step copies the CCM's credentials from kube-system.
func TestReadmeInstall(t *testing.T) {
	ensureNamespace(t, namespace, nil)
	kubeconfig := adminKubeconfig(t)
	section := readmeInstall(t)
	for _, bad := range []string{"scaleway-secret", "-n kube-system get secret"} {
		if strings.Contains(section, bad) {
			t.Errorf("the install steps still mention %q: on Kapsule the CCM's credentials are not in the cluster", bad)
		}
	}
	for _, want := range []string{"IPAMFullAccess", "PrivateNetworksReadOnly", "scw iam application create", "scw iam policy create", "scw iam api-key create", "v0.36.0", "at most 8 Private Networks"} {
		if !strings.Contains(section, want) {
			t.Errorf("the install steps do not say %q", want)
		}
	}

	// The guide's kubectl create secret, run as written but for the
	// values its shell computes.
	var create []string
	for _, c := range shellCommands(section) {
		if w := shellWords(c); len(w) > 0 && w[0] == "kubectl" && slices.Contains(w, "secret") && slices.Contains(w, "generic") {
			create = w[1:]
		}
	}
	if create == nil {
		t.Fatal("the install steps have no kubectl create secret generic command")
	}
	fake := map[string]string{
		"SCW_ACCESS_KEY":         "SCWABCDEFGHIJKLMNOPQ",
		"SCW_SECRET_KEY":         emulatorSecretKey,
		"SCW_DEFAULT_PROJECT_ID": emulator.DefaultProjectID,
	}
	var secretName string
	for i, w := range create {
		if k, v, ok := strings.Cut(strings.TrimPrefix(w, "--from-literal="), "="); ok && strings.HasPrefix(w, "--from-literal=") && strings.Contains(v, "$") {
			if fake[k] == "" {
				t.Fatalf("docs/install.md computes %s in the shell (%s): give the test a value for it", k, v)
			}
			create[i] = "--from-literal=" + k + "=" + fake[k]
		}
		if w == "generic" && i+1 < len(create) {
			secretName = create[i+1]
		}
	}
	cmd := exec.Command(filepath.Join(root, "bin", "kubectl"), append(create, "--kubeconfig", kubeconfig)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(create, " "), err, out)
	}
	secret := &corev1.Secret{}
	if err := kube.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: secretName}, secret); err != nil {
		t.Fatalf("the install guide's Secret %s/%s: %v", namespace, secretName, err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), secret) })
	if got := string(secret.Data["SCW_DEFAULT_PROJECT_ID"]); got != emulator.DefaultProjectID {
		t.Errorf("SCW_DEFAULT_PROJECT_ID = %q in the Secret, want %q", got, emulator.DefaultProjectID)
	}
	// The keys the chart puts in a Secret of its own are the ones the pods
	// need from an existing one.
	production := filepath.Join(root, "examples", "values-production.yaml")
	own := one(t, render(t, []string{production}, "scaleway.existingSecret=", "scaleway.accessKey=a", "scaleway.secretKey=b", "scaleway.projectID="+emulator.DefaultProjectID), "Secret")
	for k := range field(t, own, "stringData").(map[string]any) {
		if _, ok := secret.Data[k]; !ok {
			t.Errorf("the install guide's Secret lacks %s, which the chart's pods read", k)
		}
	}

	dep := one(t, render(t, []string{production}), "Deployment")
	containers := field(t, dep, "spec", "template", "spec", "containers").([]any)
	var refs []string
	for _, from := range containers[0].(map[string]any)["envFrom"].([]any) {
		if name, ok, _ := unstructured.NestedString(from.(map[string]any), "secretRef", "name"); ok {
			refs = append(refs, name)
		}
	}
	if !slices.Contains(refs, secretName) {
		t.Errorf("the production values read the Secrets %v, not the install guide's %s", refs, secretName)
	}
	out, err := helm(t, "upgrade", "--install", release, chartDir, "--namespace", namespace,
		"--values", production, "--kubeconfig", kubeconfig, "--dry-run=server")
	if err != nil {
		t.Fatalf("helm upgrade --install --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: MutatingWebhookConfiguration", "kind: Certificate", "kind: ServiceMonitor", "kubectl label namespace <namespace> scw-lb-ipam.io/enabled=true"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q", want)
		}
	}
}

// TestReadmeUpgradeUninstall runs the install guide's upgrade and uninstall for
// real (release "lifecycle", its webhook set to Ignore so that it does not
// stand in the other tests' way; no kubelet runs its pods): the upgrade
// applies, and the uninstall removes every object of the release and
// leaves the Services, their annotations and their finalizers, as they
// were.
func TestReadmeUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	const rel, ns = "lifecycle", "lifecycle"
	ensureNamespace(t, ns, nil)
	ensureNamespace(t, "lifecycle-apps", map[string]string{"scw-lb-ipam.io/enabled": "true"})
	kubeconfig := adminKubeconfig(t)
	values := []string{"--values", filepath.Join(chartDir, "ci", "self-managed-values.yaml"), "--set", "webhook.failurePolicy=Ignore"}
	run := func(args ...string) {
		t.Helper()
		if out, err := helm(t, append(append(args, "--namespace", ns, "--kubeconfig", kubeconfig), values...)...); err != nil {
			t.Fatalf("helm %s: %v\n%s", args[0], err, out)
		}
	}
	run("upgrade", "--install", rel, chartDir)
	defer helm(t, "uninstall", rel, "--namespace", ns, "--kubeconfig", kubeconfig) //nolint:errcheck // cleanup after a failure
	// A Service as the webhook leaves it.
	svc := fixtures.Service("lifecycle-apps", "api", map[string]string{
		"scw-lb-ipam.io/pool": "dc-link", "scw-lb-ipam.io/addresses": "172.16.4.200",
		"service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids": "6f8919b4-bbb4-4bde-8b0b-f9f8a594d932",
	})
	if err := kube.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	defer kube.Delete(ctx, svc) //nolint:errcheck // cleanup
	before := svc.DeepCopy()

	run("upgrade", rel, chartDir, "--set", "replicaCount=3")
	dep := &appsv1.Deployment{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel + "-scw-lb-ipam"}, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Fatalf("after the upgrade: replicas %v, want 3", dep.Spec.Replicas)
	}

	if out, err := helm(t, "uninstall", rel, "--namespace", ns, "--kubeconfig", kubeconfig, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := kube.List(ctx, &mwcs); err != nil {
		t.Fatal(err)
	}
	for _, m := range mwcs.Items {
		if strings.HasPrefix(m.Name, rel) {
			t.Fatalf("webhook configuration %s left after uninstall", m.Name)
		}
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Deployment left after uninstall: %v", err)
	}
	after := &corev1.Service{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(svc), after); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(after.Annotations, before.Annotations) || len(after.Finalizers) != 0 || after.DeletionTimestamp != nil {
		t.Fatalf("the Service changed with the uninstall: annotations %v, finalizers %v", after.Annotations, after.Finalizers)
	}
}
