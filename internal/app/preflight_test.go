package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/scaleway/scaleway-sdk-go/scw"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/sweeper"
)

// preflightOtherProject is a Project the test credentials do not book in.
const preflightOtherProject = "2b7f4d1e-9c3a-4e5f-8a6b-7c8d9e0f1a2b"

// webhookMode is how the stand-in for the apiserver and the webhook answers
// the dry-run create.
type webhookMode int

const (
	webhookAnswers webhookMode = iota // admitted, with the webhook's dry-run warning
	webhookDown                       // failurePolicy Fail, no pod behind the Service
	webhookIgnored                    // failurePolicy Ignore, no pod: admitted, no warning
)

// preflightWorld is an emulator with the cluster's network and two pools'
// (one with ranges), and a cluster with namespace payments opted in and the
// chart's webhook configuration.
type preflightWorld struct {
	srv  *ipamtest.Server
	pns  map[string]ipamtest.PrivateNetwork
	o    PreflightOptions
	mode webhookMode
	// objects of the cluster; the test may change them before run.
	namespaces []*corev1.Namespace
	mwc        *admissionregistrationv1.MutatingWebhookConfiguration
	// dryRuns are the Services the stand-in was asked to create.
	dryRuns []*corev1.Service
}

func newPreflightWorld(t *testing.T) *preflightWorld {
	t.Helper()
	srv := ipamtest.NewTestServer(t, ipamtest.Options{SecretKey: statusSecret})
	pns, err := srv.AddPrivateNetworks("nodes=172.16.0.0/22", "dc=172.16.32.0/22", "edge=10.10.0.0/29")
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := certutil.GenerateSelfSignedCertKey("scw-lb-ipam.scw-lb-ipam.svc", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &preflightWorld{srv: srv, pns: pns}
	w.namespaces = []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{ccm.LabelEnabled: "true"}}},
		// Labelled, but excluded: never the dry run's namespace.
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{ccm.LabelEnabled: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
	}
	w.mwc = &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "scw-lb-ipam"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "services.scw-lb-ipam.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca}}},
	}
	w.o = PreflightOptions{
		ConfigFile:           w.writePoolFile(t, pns["nodes"].ID, pns["dc"].ID, ""),
		Output:               "table",
		WebhookConfiguration: "scw-lb-ipam",
		ReleaseNamespace:     "scw-lb-ipam",
		Excluded:             []string{"kube-system", "scw-lb-ipam"},
		ScalewayOptions:      w.auth(statusSecret),
	}
	return w
}

func (w *preflightWorld) auth(secret string) []scw.ClientOption {
	return []scw.ClientOption{scw.WithAPIURL(w.srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", secret), scw.WithDefaultProjectID(ipamtest.DefaultProjectID)}
}

// writePoolFile writes a pool file whose pool dc-link is on network dc and
// pool edge on edge (subnet, when set, named explicitly).
func (w *preflightWorld) writePoolFile(t *testing.T, cluster, dc, subnet string) string {
	t.Helper()
	sub := ""
	if subnet != "" {
		sub = ", subnet: " + subnet
	}
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`clusterName: prod
region: fr-par
clusterPrivateNetworkID: %s
pools:
  - {name: dc-link, privateNetworkID: %s, ranges: ["172.16.35.10-172.16.35.19"], namespaces: [payments], retention: 24h}
  - {name: edge, privateNetworkID: %s%s}
`, cluster, dc, w.pns["edge"].ID, sub)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// run runs preflight against the world as it is now.
func (w *preflightWorld) run(t *testing.T) (string, error) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	objs := []client.Object{w.mwc}
	for _, ns := range w.namespaces {
		objs = append(objs, ns)
	}
	var mu sync.Mutex
	var warnings []string
	o := w.o
	o.Kube = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			co := (&client.CreateOptions{}).ApplyOptions(opts)
			svc, ok := obj.(*corev1.Service)
			if !ok || len(co.DryRun) == 0 {
				return fmt.Errorf("preflight created %T %s without dry run", obj, obj.GetName())
			}
			w.dryRuns = append(w.dryRuns, svc.DeepCopy())
			switch w.mode {
			case webhookDown:
				return errors.New(`Internal error occurred: failed calling webhook "services.scw-lb-ipam.io": failed to call webhook: Post "https://scw-lb-ipam.scw-lb-ipam.svc:443/mutate-v1-service?timeout=10s": no endpoints available for service "scw-lb-ipam"`)
			case webhookAnswers:
				mu.Lock()
				warnings = append(warnings, "scw-lb-ipam: dry run: would reserve 172.16.35.10 from pool "+svc.Annotations[ccm.AnnotationPool]+"; nothing was booked")
				mu.Unlock()
			}
			return nil
		},
	}).Build()
	o.Warnings = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), warnings...)
	}
	var out bytes.Buffer
	err := Preflight(context.Background(), o, &out)
	return out.String(), err
}

// checkLines maps each check to its printed line.
func checkLines(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		_, rest, ok := strings.Cut(l, " ")
		check, _, ok2 := strings.Cut(strings.TrimLeft(rest, " "), ": ")
		if !ok || !ok2 {
			continue // a continuation of a multi-line detail
		}
		m[check] = l
	}
	return m
}

func TestPreflightAllOK(t *testing.T) {
	w := newPreflightWorld(t)
	out, err := w.run(t)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := checkLines(t, out)
	for _, c := range []string{"credentials", "pool file", "cluster network", "pool dc-link network", "pool edge network", "pool dc-link IPAM", "pool edge IPAM", "webhook configuration", "opted-in namespace", "webhook dry run"} {
		if !strings.HasPrefix(lines[c], "ok  "+c+": ") {
			t.Errorf("check %q: %q", c, lines[c])
		}
	}
	if len(lines) != 10 {
		t.Errorf("%d checks, want 10 (no canary without --write):\n%s", len(lines), out)
	}
	for _, want := range []string{
		"ok  credentials: the API key authenticates in region fr-par, Project " + ipamtest.DefaultProjectID,
		"ok  pool dc-link network: Private Network " + w.pns["dc"].ID + " is in Project " + ipamtest.DefaultProjectID + " and holds subnet 172.16.32.0/22",
		"ok  opted-in namespace: payments (labelled scw-lb-ipam.io/enabled=true), which may use pool dc-link",
		`ok  webhook dry run: the webhook answered scw-lb-ipam-preflight-`,
		`"scw-lb-ipam: dry run: would reserve 172.16.35.10 from pool dc-link; nothing was booked"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(w.dryRuns) != 1 || w.dryRuns[0].Namespace != "payments" || w.dryRuns[0].Spec.Type != corev1.ServiceTypeLoadBalancer || w.dryRuns[0].Annotations[ccm.AnnotationPool] != "dc-link" {
		t.Errorf("dry runs: %+v", w.dryRuns)
	}
	for _, op := range []ipamtest.Op{ipamtest.OpBookIP, ipamtest.OpUpdateIP, ipamtest.OpReleaseIP} {
		if n := w.srv.Count(op); n > 0 {
			t.Errorf("without --write preflight called %s %d times", op, n)
		}
	}
}

func TestPreflightFailures(t *testing.T) {
	const wrongSecret = "00000000-1111-4222-8333-444444444444"
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, w *preflightWorld)
		// want are lines (or parts of them) the output must hold.
		want []string
	}{
		{
			name:   "wrong key",
			change: func(t *testing.T, w *preflightWorld) { w.o.ScalewayOptions = w.auth(wrongSecret) },
			want: []string{
				"FAIL credentials: Scaleway rejects the API key (",
				"it is revoked, mistyped, or lacks IPAM rights. Create an IAM application with the permission sets IPAMFullAccess and PrivateNetworksReadOnly",
				"skip pool file: skipped: credentials failed (the file parses: pools dc-link, edge; its networks are not checked)",
				"skip cluster network: skipped: credentials failed",
				"skip pool dc-link network: skipped: credentials failed",
				"skip pool dc-link IPAM: skipped: pool dc-link network failed",
				// The webhook does not need Scaleway.
				"ok  webhook dry run: ",
			},
		},
		{
			name: "no default Project",
			change: func(t *testing.T, w *preflightWorld) {
				w.o.ScalewayOptions = []scw.ClientOption{scw.WithAPIURL(w.srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", statusSecret)}
			},
			want: []string{"FAIL credentials: the API key authenticates but SCW_DEFAULT_PROJECT_ID is not set: bookings would land in the key's default Project, which need not be the networks'. Add SCW_DEFAULT_PROJECT_ID (the cluster's Project) to the Secret"},
		},
		{
			name: "network in another Project",
			change: func(t *testing.T, w *preflightWorld) {
				other, err := w.srv.AddPrivateNetworkInProject(preflightOtherProject, "elsewhere", "172.16.32.0/22")
				if err != nil {
					t.Fatal(err)
				}
				w.o.ConfigFile = w.writePoolFile(t, w.pns["nodes"].ID, other.ID, "")
			},
			want: []string{
				"FAIL pool file: pool file does not match the Private Networks:",
				"FAIL pool dc-link network: pools[0] (dc-link).privateNetworkID: Private Network ", " (elsewhere) is in Project " + preflightOtherProject + ", not in the credentials' Project " + ipamtest.DefaultProjectID + " (SCW_DEFAULT_PROJECT_ID)",
				"skip pool dc-link IPAM: skipped: pool dc-link network failed",
				"ok  pool edge network: ",
				"ok  pool edge IPAM: ",
			},
		},
		{
			name: "missing subnet",
			change: func(t *testing.T, w *preflightWorld) {
				w.o.ConfigFile = w.writePoolFile(t, w.pns["nodes"].ID, w.pns["dc"].ID, "10.20.0.0/24")
			},
			want: []string{
				"FAIL pool file: pool file does not match the Private Networks:",
				"FAIL pool edge network: pools[1] (edge).subnet: 10.20.0.0/24 is not a subnet of Private Network " + "%edge%" + " (edge has 10.10.0.0/29, ",
				"skip pool edge IPAM: skipped: pool edge network failed",
				"ok  pool dc-link IPAM: ",
				"Give the pool a Private Network of Project " + ipamtest.DefaultProjectID + " that holds its subnet",
			},
		},
		{
			name: "cluster network missing",
			change: func(t *testing.T, w *preflightWorld) {
				w.o.ConfigFile = w.writePoolFile(t, "00000000-0000-4000-8000-0000000000aa", w.pns["dc"].ID, "")
			},
			want: []string{
				"FAIL cluster network: clusterPrivateNetworkID 00000000-0000-4000-8000-0000000000aa: no such Private Network in region fr-par. Set clusterPrivateNetworkID to the nodes' Private Network",
				"ok  pool dc-link IPAM: ",
			},
		},
		{
			name:   "webhook unreachable",
			change: func(t *testing.T, w *preflightWorld) { w.mode = webhookDown },
			want: []string{
				"FAIL webhook dry run: a dry-run create of LoadBalancer Service payments/scw-lb-ipam-preflight-",
				"(pool dc-link): the apiserver could not call the webhook: Internal error occurred: failed calling webhook",
				"Check the webhook's pods",
			},
		},
		{
			name:   "webhook down under failurePolicy Ignore",
			change: func(t *testing.T, w *preflightWorld) { w.mode = webhookIgnored },
			want: []string{
				"(pool dc-link) was admitted without the webhook's warning: the webhook did not answer (failurePolicy Ignore lets Services through while it is down)",
			},
		},
		{
			name: "bad caBundle",
			change: func(t *testing.T, w *preflightWorld) {
				w.mwc.Webhooks[0].ClientConfig.CABundle = []byte("not a certificate")
			},
			want: []string{
				"FAIL webhook configuration: webhook services.scw-lb-ipam.io of scw-lb-ipam: the caBundle is not PEM certificates (",
				"Remove the caBundle so that cert-manager or the pods set it again",
				"skip webhook dry run: skipped: webhook configuration failed",
			},
		},
		{
			name: "empty caBundle",
			change: func(t *testing.T, w *preflightWorld) {
				w.mwc.Webhooks[0].ClientConfig.CABundle = nil
			},
			want: []string{"FAIL webhook configuration: webhook services.scw-lb-ipam.io of scw-lb-ipam has no caBundle"},
		},
		{
			name:   "webhook configuration missing",
			change: func(t *testing.T, w *preflightWorld) { w.o.WebhookConfiguration = "prod-scw-lb-ipam" },
			want:   []string{"FAIL webhook configuration: MutatingWebhookConfiguration prod-scw-lb-ipam does not exist. Install the chart, or pass --webhook-configuration"},
		},
		{
			name:   "no opted-in namespace",
			change: func(t *testing.T, w *preflightWorld) { delete(w.namespaces[0].Labels, ccm.LabelEnabled) },
			want: []string{
				"FAIL opted-in namespace: no namespace is opted in: the webhook ignores every Service. Label the namespaces of your LoadBalancer Services: kubectl label namespace <namespace> scw-lb-ipam.io/enabled=true",
				"skip webhook dry run: skipped: opted-in namespace failed",
			},
		},
		{
			name:   "--namespace not opted in",
			change: func(t *testing.T, w *preflightWorld) { w.o.Namespace = "web" },
			want:   []string{"FAIL opted-in namespace: namespace web is not opted in (no label scw-lb-ipam.io/enabled=true). Kubectl label namespace web scw-lb-ipam.io/enabled=true"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newPreflightWorld(t)
			tt.change(t, w)
			out, err := w.run(t)
			if err == nil || !strings.Contains(err.Error(), "checks failed or were skipped") {
				t.Errorf("err = %v, want the failed checks counted", err)
			}
			for _, want := range tt.want {
				want = strings.ReplaceAll(want, "%edge%", w.pns["edge"].ID)
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, wrongSecret) || strings.Contains(out, statusSecret) {
				t.Errorf("a secret key is printed:\n%s", out)
			}
		})
	}
}

// TestPreflightWriteCanary: --write books exactly one address per pool
// (inside the ranges of a pool that has them), releases it, and leaves
// nothing behind.
func TestPreflightWriteCanary(t *testing.T) {
	w := newPreflightWorld(t)
	w.o.Write = true
	out, err := w.run(t)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if book, release := w.srv.Count(ipamtest.OpBookIP), w.srv.Count(ipamtest.OpReleaseIP); book != 2 || release != 2 {
		t.Errorf("BookIP %d, ReleaseIP %d; want 2 and 2 (one per pool)", book, release)
	}
	if !strings.Contains(out, "ok  pool dc-link canary: booked 172.16.35.10 (IPAM ID ") || !strings.Contains(out, "ok  pool edge canary: booked 10.10.0.") {
		t.Errorf("canary lines:\n%s", out)
	}
	cloud := w.cloud(t)
	for _, pn := range []string{"dc", "edge"} {
		ips, err := cloud.ListIPs(context.Background(), scaleway.ListFilter{PrivateNetworkID: w.pns[pn].ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(ips) != 0 {
			t.Errorf("network %s keeps %d IPs after the canary: %+v", pn, len(ips), ips[0])
		}
	}
}

func (w *preflightWorld) cloud(t *testing.T) scaleway.Cloud {
	t.Helper()
	c, err := scaleway.New(context.Background(), scaleway.Options{Region: "fr-par", ClientOptions: w.auth(statusSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPreflightLostCanaryIsSwept: a canary whose release fails is tagged
// as this cluster's orphan; the sweeper's cycle releases it once the pending
// grace is over, and not before.
func TestPreflightLostCanaryIsSwept(t *testing.T) {
	w := newPreflightWorld(t)
	w.o.Write = true
	booked := time.Now()
	w.o.Now = func() time.Time { return booked }
	// Forbidden is not retried: the one release call of the first pool fails.
	w.srv.FailNext(ipamtest.OpReleaseIP, 1, ipamtest.Fault{Status: 403})
	out, err := w.run(t)
	if err == nil {
		t.Fatalf("a lost release passed:\n%s", out)
	}
	if !strings.Contains(out, "FAIL pool dc-link canary: booked 172.16.35.10 (IPAM ID ") || !strings.Contains(out, "but releasing it failed") ||
		!strings.Contains(out, "the sweeper releases it once its pending grace is over") || !strings.Contains(out, "ok  pool edge canary: ") {
		t.Fatalf("output:\n%s", out)
	}
	cloud := w.cloud(t)
	left, err := cloud.ListIPs(context.Background(), scaleway.ListFilter{PrivateNetworkID: w.pns["dc"].ID})
	if err != nil || len(left) != 1 {
		t.Fatalf("left on dc: %v, %v", left, err)
	}
	entry, ours := ipam.ParseEntry(left[0].Tags)
	if !ours || entry.Cluster != "prod" || entry.Pool != "dc-link" || entry.Service.String() != "scw-lb-ipam/"+PreflightCanaryName || entry.OrphanedSince.Sub(booked).Abs() > time.Second {
		t.Fatalf("canary's ledger: %+v (ours %v)", entry, ours)
	}

	cfg, _, err := loadConfig(w.o.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Resolve(context.Background(), cloud); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	clk := clocktesting.NewFakeClock(booked.Add(sweeper.DefaultPendingGrace - time.Minute))
	s := sweeper.New(sweeper.Options{Cloud: cloud, Config: func() *ipam.Config { return cfg }, Clock: clk,
		Services: fake.NewClientBuilder().WithScheme(scheme).Build(), Log: logr.Discard()})
	rep, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scanned != 1 || rep.Orphaned != 1 || len(rep.Released) != 0 {
		t.Fatalf("inside the pending grace: %+v", rep)
	}
	clk.SetTime(booked.Add(sweeper.DefaultPendingGrace + time.Second))
	if rep, err = s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rep.Released) != 1 || rep.Released[0] != left[0].ID {
		t.Fatalf("after the pending grace: %+v, want %s released", rep, left[0].ID)
	}
}

func TestPreflightJSON(t *testing.T) {
	w := newPreflightWorld(t)
	w.mode = webhookDown
	w.o.Output = "json"
	out, err := w.run(t)
	if err == nil {
		t.Fatal("a failed check exits 0")
	}
	var checks []map[string]any
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(checks) != 10 {
		t.Fatalf("%d checks:\n%s", len(checks), out)
	}
	for _, c := range checks {
		ok, _ := c["ok"].(bool)
		name, _ := c["check"].(string)
		detail, _ := c["detail"].(string)
		fix, _ := c["fix"].(string)
		if name == "" || detail == "" {
			t.Errorf("check without a name or detail: %v", c)
		}
		if ok != (name != "webhook dry run") || !ok && fix == "" {
			t.Errorf("check %v", c)
		}
	}
}

func TestPreflightFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "infra")
	o, err := ParsePreflightFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.ConfigFile != "/etc/scw-lb-ipam/pools.yaml" || o.WebhookConfiguration != DefaultWebhookConfiguration || o.ReleaseNamespace != "infra" || o.Write || o.Output != "table" || strings.Join(o.Excluded, ",") != "kube-system,infra" {
		t.Errorf("defaults: %+v", o)
	}
	if _, err := ParsePreflightFlags([]string{"-o", "yaml"}); err == nil || !strings.Contains(err.Error(), "table or json") {
		t.Errorf("-o yaml: %v", err)
	}
	if _, err := ParsePreflightFlags([]string{"--webhook-configuration="}); err == nil || !strings.Contains(err.Error(), "kubectl get mutatingwebhookconfigurations") {
		t.Errorf("empty --webhook-configuration: %v", err)
	}
	if _, err := ParsePreflightFlags([]string{"write"}); err == nil || !strings.Contains(err.Error(), "flags only") {
		t.Errorf("a stray argument: %v", err)
	}
}

// TestPreflightNoCluster: without a Kubernetes configuration the webhook's
// checks fail or are skipped, saying why once; the Scaleway ones still run.
func TestPreflightNoCluster(t *testing.T) {
	w := newPreflightWorld(t)
	o := w.o
	o.Kubeconfig = filepath.Join(t.TempDir(), "no-kubeconfig")
	var out bytes.Buffer
	err := Preflight(context.Background(), o, &out)
	for _, want := range []string{"ok  pool edge IPAM: ", "FAIL webhook configuration: --kubeconfig " + o.Kubeconfig + ": ", "Run preflight in the cluster (helm test <release>) or pass --kubeconfig",
		"skip opted-in namespace: skipped: webhook configuration failed", "skip webhook dry run: skipped: webhook configuration failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err == nil {
		t.Error("no error")
	}
}

// TestPreflightMissingPoolFile: a pool file that cannot be read is the
// loader's own error, and what needs it is skipped.
func TestPreflightMissingPoolFile(t *testing.T) {
	w := newPreflightWorld(t)
	w.o.ConfigFile = filepath.Join(t.TempDir(), "nope.yaml")
	out, err := w.run(t)
	if err == nil || !strings.Contains(out, "FAIL pool file: reading the pool file: ") || !strings.Contains(out, "skip cluster network: skipped: pool file failed") ||
		!strings.Contains(out, "skip opted-in namespace: skipped: pool file failed") || !strings.Contains(out, "ok  credentials: ") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
}
