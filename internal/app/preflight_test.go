package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/scaleway/scaleway-sdk-go/scw"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
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
	webhookRefused                    // the apiserver answers dryRunErr, before or after the webhook
)

// preflightWorld is an emulator with the cluster's network and two pools'
// (one with ranges), and a cluster with namespace payments opted in and the
// chart's webhook configuration.
type preflightWorld struct {
	srv  *emulator.Server
	pns  map[string]emulator.PrivateNetwork
	o    PreflightOptions
	mode webhookMode
	// objects of the cluster; the test may change them before run.
	namespaces []*corev1.Namespace
	mwc        *admissionregistrationv1.MutatingWebhookConfiguration
	// dryRuns are the Services the stand-in was asked to create.
	dryRuns []*corev1.Service
	// dryRunErr is the apiserver's answer in mode webhookRefused.
	dryRunErr func(name string) error
}

func newPreflightWorld(t *testing.T) *preflightWorld {
	t.Helper()
	srv := emulator.NewTestServer(t, emulator.Options{SecretKey: statusSecret})
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
		{ObjectMeta: metav1.ObjectMeta{Name: "payments", Labels: map[string]string{request.LabelEnabled: "true"}}},
		// Labelled, but excluded: never the dry run's namespace.
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{request.LabelEnabled: "true"}}},
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
	return []scw.ClientOption{scw.WithAPIURL(w.srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", secret), scw.WithDefaultProjectID(emulator.DefaultProjectID)}
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
	objs := []client.Object{w.mwc}
	for _, ns := range w.namespaces {
		objs = append(objs, ns)
	}
	var mu sync.Mutex
	var warnings []string
	o := w.o
	o.Kube = fixtures.FakeKube().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			co := (&client.CreateOptions{}).ApplyOptions(opts)
			svc, ok := obj.(*corev1.Service)
			if !ok || len(co.DryRun) == 0 {
				return fmt.Errorf("preflight created %T %s without dry run", obj, obj.GetName())
			}
			w.dryRuns = append(w.dryRuns, svc.DeepCopy())
			switch w.mode {
			case webhookRefused:
				return w.dryRunErr(svc.Name)
			case webhookDown:
				return errors.New(`Internal error occurred: failed calling webhook "services.scw-lb-ipam.io": failed to call webhook: Post "https://scw-lb-ipam.scw-lb-ipam.svc:443/mutate-v1-service?timeout=10s": no endpoints available for service "scw-lb-ipam"`)
			case webhookAnswers:
				mu.Lock()
				warnings = append(warnings, "scw-lb-ipam: dry run: would reserve 172.16.35.10 from pool "+svc.Annotations[request.AnnotationPool]+"; nothing was booked")
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
	for _, c := range []string{"credentials", "pool file", "cluster network", "pool dc-link network", "pool edge network", "pool dc-link IPAM", "pool edge IPAM", "Load Balancer networks", "webhook configuration", "opted-in namespace", "webhook dry run"} {
		if !strings.HasPrefix(lines[c], "ok  "+c+": ") {
			t.Errorf("check %q: %q", c, lines[c])
		}
	}
	for _, c := range []string{"booking rights", "CCM version"} {
		if !strings.HasPrefix(lines[c], "info "+c+": ") {
			t.Errorf("check %q: %q", c, lines[c])
		}
	}
	if len(lines) != 13 {
		t.Errorf("%d checks, want 13 (no canary without --write):\n%s", len(lines), out)
	}
	for _, want := range []string{
		"ok  credentials: the API key authenticates in region fr-par and may list IPAM in Project " + emulator.DefaultProjectID,
		"info booking rights: not checked: ", "run with --write (helm: tests.preflight.write=true)",
		// payments may use both pools: nodes, dc and edge.
		"ok  Load Balancer networks: a Service of namespace payments asking every pool it may use needs 3 of a Load Balancer's 8 Private Networks",
		"info CCM version: not readable from here", "needs v0.36.0 or later", "reason not_attached (Event IPNotApplied",
		"ok  pool dc-link network: Private Network " + w.pns["dc"].ID + " is in Project " + emulator.DefaultProjectID + " and holds subnet 172.16.32.0/22",
		"ok  opted-in namespace: payments (labelled scw-lb-ipam.io/enabled=true), which may use pool dc-link",
		`ok  webhook dry run: the webhook answered scw-lb-ipam-preflight-`,
		`"scw-lb-ipam: dry run: would reserve 172.16.35.10 from pool dc-link; nothing was booked"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(w.dryRuns) != 1 || w.dryRuns[0].Namespace != "payments" || w.dryRuns[0].Spec.Type != corev1.ServiceTypeLoadBalancer || w.dryRuns[0].Annotations[request.AnnotationPool] != "dc-link" {
		t.Errorf("dry runs: %+v", w.dryRuns)
	}
	for _, op := range []emulator.Op{emulator.OpBookIP, emulator.OpUpdateIP, emulator.OpReleaseIP} {
		if n := w.srv.Count(op); n > 0 {
			t.Errorf("without --write preflight called %s %d times", op, n)
		}
	}
	// The pool file's Resolve, the cluster network's line and each pool's
	// line share one read of each network.
	if n := w.srv.Count(emulator.OpGetPrivateNetwork); n != 3 {
		t.Errorf("GetPrivateNetwork called %d times for 3 networks", n)
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
				"FAIL credentials: Scaleway rejects the API key (scaleway-sdk-go: denied authentication",
				"the key does not exist, is revoked or expired, or the secret key does not match it. Put the access and secret key of an existing API key in the Secret",
				"skip pool file: skipped: credentials failed (the file parses: pools dc-link, edge; its networks are not checked)",
				"skip cluster network: skipped: credentials failed",
				"skip pool dc-link network: skipped: credentials failed",
				"skip pool dc-link IPAM: skipped: pool dc-link network failed",
				// The webhook does not need Scaleway.
				"ok  webhook dry run: ",
			},
		},
		{
			// 403 permissions_denied, as IAM answers a key whose application
			// has its policy on another Project.
			name: "key of another Project",
			change: func(t *testing.T, w *preflightWorld) {
				const secret = "5e5e5e5e-0000-4000-8000-000000000005"
				w.srv.AddKey(emulator.Key{SecretKey: secret, ProjectIDs: []string{preflightOtherProject}, PermissionSets: scaleway.PermissionSets})
				w.o.ScalewayOptions = w.auth(secret)
			},
			want: []string{
				"FAIL credentials: the API key authenticates but may not list IPAM in Project " + emulator.DefaultProjectID + " (scaleway-sdk-go: insufficient permissions",
				"its IAM application lacks IPAMFullAccess there. Give the key's IAM application a policy on Project " + emulator.DefaultProjectID + " with the permission sets IPAMFullAccess and PrivateNetworksReadOnly",
				"skip pool dc-link network: skipped: credentials failed",
			},
		},
		{
			// The install guide's policy without its second set: IPAM
			// answers, the networks are refused.
			name: "key without PrivateNetworksReadOnly",
			change: func(t *testing.T, w *preflightWorld) {
				const secret = "6e6e6e6e-0000-4000-8000-000000000006"
				w.srv.AddKey(emulator.Key{SecretKey: secret, ProjectIDs: []string{emulator.DefaultProjectID}, PermissionSets: []string{scaleway.IPAMFullAccess}})
				w.o.ScalewayOptions = w.auth(secret)
			},
			want: []string{
				"ok  credentials: the API key authenticates in region fr-par and may list IPAM in Project " + emulator.DefaultProjectID,
				"FAIL cluster network: clusterPrivateNetworkID ", "insufficient permissions: read private_network. Check that the API key has PrivateNetworksReadOnly on the cluster's Project",
				"FAIL pool dc-link network: ", "Give the key's IAM application PrivateNetworksReadOnly on the network's Project",
				"skip pool dc-link IPAM: skipped: pool dc-link network failed",
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
				"FAIL pool dc-link network: pools[0] (dc-link).privateNetworkID: Private Network ", " (elsewhere) is in Project " + preflightOtherProject + ", not in the credentials' Project " + emulator.DefaultProjectID + " (SCW_DEFAULT_PROJECT_ID)",
				"skip pool dc-link IPAM: skipped: pool dc-link network failed",
				"IPAM books only in a network's own Project: move the pool to a Private Network of Project " + emulator.DefaultProjectID + ", or run the release with an API key and SCW_DEFAULT_PROJECT_ID of Project " + preflightOtherProject,
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
				"Name in the pool's subnet one of the network's subnets (the line lists them), or add that subnet to the network",
			},
		},
		{
			name: "ranges outside the subnet",
			change: func(t *testing.T, w *preflightWorld) {
				w.o.ConfigFile = filepath.Join(t.TempDir(), "pools.yaml")
				if err := os.WriteFile(w.o.ConfigFile, []byte(fmt.Sprintf(`clusterName: prod
region: fr-par
clusterPrivateNetworkID: %s
pools:
  - {name: dc-link, privateNetworkID: %s, ranges: ["172.16.40.10-172.16.40.19"], namespaces: [payments]}
`, w.pns["nodes"].ID, w.pns["dc"].ID)), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{
				`FAIL pool dc-link network: pools[0] (dc-link).ranges[0]: "172.16.40.10-172.16.40.19" is outside subnet 172.16.32.0/22`,
				"Correct the pool's ranges so that they lie inside subnet 172.16.32.0/22",
			},
		},
		{
			name: "pool network missing",
			change: func(t *testing.T, w *preflightWorld) {
				w.o.ConfigFile = w.writePoolFile(t, w.pns["nodes"].ID, "00000000-0000-4000-8000-0000000000bb", "")
			},
			want: []string{
				"FAIL pool dc-link network: pools[0] (dc-link).privateNetworkID: Private Network 00000000-0000-4000-8000-0000000000bb",
				"Set the pool's privateNetworkID to a Private Network of region fr-par and Project " + emulator.DefaultProjectID + " (scw vpc private-network list project-id=",
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
			name: "ResourceQuota refuses the dry run",
			change: func(t *testing.T, w *preflightWorld) {
				w.mode = webhookRefused
				w.dryRunErr = func(name string) error {
					return apierrors.NewForbidden(corev1.Resource("services"), name, errors.New("exceeded quota: lb-quota, requested: services.loadbalancers=1, used: services.loadbalancers=2, limited: services.loadbalancers=2"))
				}
			},
			want: []string{
				"(pool dc-link): ResourceQuota lb-quota of namespace payments refuses it (a dry run is counted as a create): services \"scw-lb-ipam-preflight-",
				"Raise the quota's services.loadbalancers (kubectl -n payments describe resourcequota lb-quota)",
			},
		},
		{
			name: "another webhook denies the dry run",
			change: func(t *testing.T, w *preflightWorld) {
				w.mode = webhookRefused
				w.dryRunErr = func(string) error {
					return apierrors.NewBadRequest(`admission webhook "no-lb.policy.example.com" denied the request: LoadBalancer Services are not allowed here`)
				}
			},
			want: []string{
				"(pool dc-link): webhook no-lb.policy.example.com, not scw-lb-ipam's, denied it: admission webhook",
				"That webhook's policy refuses a LoadBalancer Service with annotations scw-lb-ipam.io/pool and service.beta.kubernetes.io/scw-loadbalancer-private in namespace payments",
			},
		},
		{
			name: "another webhook cannot be called",
			change: func(t *testing.T, w *preflightWorld) {
				w.mode = webhookRefused
				w.dryRunErr = func(string) error {
					return apierrors.NewInternalError(errors.New(`failed calling webhook "sidecar.mesh.example.com": failed to call webhook: Post "https://mesh.mesh.svc:443/inject": context deadline exceeded`))
				}
			},
			want: []string{"(pool dc-link): webhook sidecar.mesh.example.com, not scw-lb-ipam's, could not be called: "},
		},
		{
			name: "RBAC refuses the dry run",
			change: func(t *testing.T, w *preflightWorld) {
				w.mode = webhookRefused
				w.dryRunErr = func(name string) error {
					return apierrors.NewForbidden(corev1.Resource("services"), name, errors.New(`User "system:serviceaccount:scw-lb-ipam:scw-lb-ipam-preflight" cannot create resource "services" in API group "" in the namespace "payments"`))
				}
			},
			want: []string{"(pool dc-link): the account preflight runs as may not create Services there: ", "Allow create on services in namespace payments to that account"},
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
			change: func(t *testing.T, w *preflightWorld) { delete(w.namespaces[0].Labels, request.LabelEnabled) },
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
	if book, release := w.srv.Count(emulator.OpBookIP), w.srv.Count(emulator.OpReleaseIP); book != 2 || release != 2 {
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
	w.srv.FailNext(emulator.OpReleaseIP, 1, emulator.Fault{Status: 403})
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
	if err := inventory.Resolve(context.Background(), cloud, cfg); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(booked.Add(sweeper.DefaultPendingGrace - time.Minute))
	s := sweeper.New(sweeper.Options{Cloud: cloud, Config: func() *ipam.Config { return cfg }, Clock: clk,
		Services: fixtures.FakeKube().Build(), Log: logr.Discard()})
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
	if len(checks) != 13 {
		t.Fatalf("%d checks:\n%s", len(checks), out)
	}
	var infos []string
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
		if info, _ := c["info"].(bool); info {
			infos = append(infos, name)
		}
	}
	// What preflight cannot check is said, and fails nothing.
	if strings.Join(infos, ",") != "booking rights,CCM version" {
		t.Errorf("info lines %v, want booking rights and CCM version", infos)
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

// recordingTransport keeps the query of each request, to see which Project
// a call was scoped to.
type recordingTransport struct {
	mu      sync.Mutex
	queries []string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.queries = append(r.queries, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// TestPreflightCredentialsScopedToProject: the credentials' read is a list
// scoped to SCW_DEFAULT_PROJECT_ID, so that IAM answers for that Project:
// a key whose application has rights elsewhere only does not pass.
func TestPreflightCredentialsScopedToProject(t *testing.T) {
	w := newPreflightWorld(t)
	rec := &recordingTransport{}
	w.o.ScalewayOptions = append(w.o.ScalewayOptions, scw.WithHTTPClient(&http.Client{Transport: rec}))
	if out, err := w.run(t); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var first string
	for _, q := range rec.queries {
		if strings.HasPrefix(q, "GET /ipam/") || strings.HasPrefix(q, "GET /vpc/") {
			first = q
			break
		}
	}
	if !strings.HasPrefix(first, "GET /ipam/v1/regions/fr-par/ips?") || !strings.Contains(first, "project_id="+emulator.DefaultProjectID) {
		t.Errorf("the credentials' call is %q, want an IPAM list with project_id=%s (all calls: %v)", first, emulator.DefaultProjectID, rec.queries)
	}
}

// TestPreflightAuthFailure: a key Scaleway does not know (401) and a known
// key without rights (403, in both bodies IAM answers) are told apart, from
// the real bodies, by Classify and by the Key the pods report.
func TestPreflightAuthFailure(t *testing.T) {
	emuURL, err := url.Parse(newPreflightWorld(t).srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		status           int
		body             string
		rejected, denied bool
	}{
		{401, `{"message":"authentication is denied","method":"api_key","reason":"not_found","type":"denied_authentication"}`, true, false},
		{403, `{"details":[{"action":"read","resource":"ips"}],"message":"insufficient permissions","type":"permissions_denied"}`, false, true},
		{403, `{"message":"insufficient permissions","type":"authorization_required"}`, false, true},
		// A quota's 403 is no refusal of the key.
		{403, `{"details":[{"current":10,"quota":10,"resource":"ips"}],"message":"quota(s) exceeded for this resource","type":"quotas_exceeded"}`, false, false},
		{404, `{"message":"resource is not found","resource":"ip","type":"not_found"}`, false, false},
		{500, `{"message":"Internal error","type":"server_error"}`, false, false},
	} {
		// The emulator answers the rest (the SDK's metadata call).
		emu := httputil.NewSingleHostReverseProxy(emuURL)
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/ipam/") {
				emu.ServeHTTP(rw, r)
				return
			}
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(tt.status)
			_, _ = rw.Write([]byte(tt.body))
		}))
		key, err := scaleway.NewKey("SCWABCDEFGHIJKLMNOPQ", statusSecret)
		if err != nil {
			t.Fatal(err)
		}
		cloud, err := scaleway.New(context.Background(), scaleway.Options{Region: "fr-par", Backoff: wait.Backoff{Steps: 1}, Key: key, ClientOptions: []scw.ClientOption{
			scw.WithAPIURL(srv.URL), scw.WithDefaultProjectID(emulator.DefaultProjectID)}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cloud.ListIPs(context.Background(), scaleway.ListFilter{ProjectID: emulator.DefaultProjectID})
		srv.Close()
		kind := scaleway.Classify(err)
		if rejected, denied := kind == scaleway.KindUnauthenticated, kind == scaleway.KindPermissionDenied; rejected != tt.rejected || denied != tt.denied {
			t.Errorf("%d %s: rejected %v, denied %v; want %v, %v (%v)", tt.status, tt.body, rejected, denied, tt.rejected, tt.denied, err)
		}
		var refused scaleway.Refusal
		got := errors.As(key.Err(), &refused)
		switch {
		case got != (tt.rejected || tt.denied):
			t.Errorf("%d %s: the key reports %v", tt.status, tt.body, key.Err())
		case tt.rejected && (refused.Status != 401 || refused.PermissionSet != ""):
			t.Errorf("%d: the key reports %+v, want the key refused", tt.status, refused)
		case tt.denied && refused.PermissionSet != scaleway.IPAMFullAccess:
			t.Errorf("%d: the key reports %+v, want %s missing", tt.status, refused, scaleway.IPAMFullAccess)
		}
	}
}

// TestPreflightCanaryAddressTaken: an address booked by someone else between
// preflight's listing and its canary is a conflict, not missing rights.
func TestPreflightCanaryAddressTaken(t *testing.T) {
	w := newPreflightWorld(t)
	w.o.Write = true
	other := w.cloud(t)
	var raced atomic.Bool
	w.srv.SetFaultFunc(func(op emulator.Op) *emulator.Fault {
		if op != emulator.OpBookIP || !raced.CompareAndSwap(false, true) {
			return nil // later calls, the racing booking's own among them
		}
		// The canary of dc-link is about to book 172.16.35.10, the first
		// free address of its ranges: another booking takes it first.
		if _, err := other.BookIP(context.Background(), scaleway.BookRequest{PrivateNetworkID: w.pns["dc"].ID, Address: netip.MustParseAddr("172.16.35.10")}); err != nil {
			t.Errorf("the racing booking: %v", err)
		}
		return nil
	})
	out, err := w.run(t)
	if err == nil {
		t.Fatalf("a canary that could not book passed:\n%s", out)
	}
	lines := checkLines(t, out)
	if l := lines["pool dc-link canary"]; !strings.HasPrefix(l, "FAIL pool dc-link canary: booking a canary address in pool dc-link: ") ||
		!strings.Contains(l, "172.16.35.10 was taken between the listing and the booking") || strings.Contains(l, "IPAMFullAccess") {
		t.Errorf("canary line %q", l)
	}
	if l := lines["pool edge canary"]; !strings.HasPrefix(l, "ok  ") {
		t.Errorf("edge canary line %q", l)
	}
}

// TestPreflightLBNetworks: the nodes' network and the networks of the pools
// one namespace may combine must fit a Load Balancer's 8; restricting pools
// to namespaces brings each combination under it.
func TestPreflightLBNetworks(t *testing.T) {
	w := newPreflightWorld(t)
	var pools strings.Builder
	for i := range 8 {
		pn, err := w.srv.AddPrivateNetwork(fmt.Sprintf("pn%d", i), fmt.Sprintf("10.%d.0.0/24", 100+i))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&pools, "  - {name: p%d, privateNetworkID: %s, namespaces: [%%s]}\n", i, pn.ID)
	}
	write := func(namespaces ...string) string {
		lines := strings.Split(strings.TrimSuffix(pools.String(), "\n"), "\n")
		for i := range lines {
			lines[i] = fmt.Sprintf(lines[i], namespaces[i])
		}
		file := filepath.Join(t.TempDir(), "pools.yaml")
		if err := os.WriteFile(file, []byte(fmt.Sprintf("clusterName: prod\nregion: fr-par\nclusterPrivateNetworkID: %s\npools:\n%s\n", w.pns["nodes"].ID, strings.Join(lines, "\n"))), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}

	// payments may use all 8 pools: 9 networks with the nodes'.
	w.o.ConfigFile = write("payments", "payments", "payments", "payments", "payments", "payments", "payments", "pay*")
	out, err := w.run(t)
	if err == nil {
		t.Fatalf("9 networks passed:\n%s", out)
	}
	if l := checkLines(t, out)["Load Balancer networks"]; !strings.HasPrefix(l, "FAIL Load Balancer networks: a Service of namespace payments asking every pool it may use needs 9 Private Networks (the nodes' and the pools': "+w.pns["nodes"].ID+", ") ||
		!strings.Contains(l, "a Load Balancer attaches at most 8: the webhook denies such a Service") {
		t.Errorf("line %q", l)
	}

	// Split between two namespaces: 5 at most.
	w.o.ConfigFile = write("payments", "payments", "payments", "payments", "web", "web", "web", "web")
	out, _ = w.run(t)
	if l := checkLines(t, out)["Load Balancer networks"]; !strings.HasPrefix(l, "ok  Load Balancer networks: a Service of namespace payments asking every pool it may use needs 5 of a Load Balancer's 8 Private Networks") {
		t.Errorf("line %q\n%s", l, out)
	}
}

// TestPreflightFullPool: a pool full of this cluster's retained
// reservations is healthy (a new Service makes the oldest yield), so
// preflight passes and says how many yield; full of live reservations or
// of other holders it fails, with and without --write.
func TestPreflightFullPool(t *testing.T) {
	orphaned := time.Now().Add(-2 * time.Hour)
	entry := func(cluster string, i int, retained bool) []string {
		e := ipam.Entry{Cluster: cluster, Pool: "dc-link", Service: types.NamespacedName{Namespace: "payments", Name: fmt.Sprintf("old-%d", i)}, UID: fmt.Sprintf("uid-%d", i)}
		if retained {
			e.OrphanedSince = orphaned
		}
		return e.Tags()
	}
	// What the webhook answers the dry run of a CREATE in each pool.
	const (
		wouldYield = `scw-lb-ipam: pool "dc-link" is full; %d of its 10 addresses are retained for deleted Services; a CREATE would release the oldest (172.16.35.10, of the deleted payments/old-0) early and ask to be retried in ~80 s; nothing was changed (dry run)`
		exhausted  = `scw-lb-ipam: pool "dc-link" is exhausted (10/10 used); ask for another pool, or free addresses in it (scw-lb-ipam status shows who holds them)`
	)
	for _, tt := range []struct {
		name     string
		holder   func(i int) []string // the tags of the IP at 172.16.35.10+i
		denial   string
		retained int // 0: preflight fails
	}{
		{"retained reservations of this cluster", func(i int) []string { return entry("prod", i, true) }, fmt.Sprintf(wouldYield, 10), 10},
		{"one of them retained", func(i int) []string { return entry("prod", i, i == 0) }, fmt.Sprintf(wouldYield, 1), 1},
		{"live reservations of this cluster", func(i int) []string { return entry("prod", i, false) }, exhausted, 0},
		{"another cluster's retained reservations", func(i int) []string { return entry("blue", i, true) }, exhausted, 0},
		{"someone else's", func(int) []string { return []string{"database"} }, exhausted, 0},
	} {
		for _, write := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, write %v", tt.name, write), func(t *testing.T) {
				w := newPreflightWorld(t)
				w.o.Write = write
				for i := range 10 {
					if _, err := w.srv.AddIP(w.pns["dc"].ID, netip.AddrFrom4([4]byte{172, 16, 35, byte(10 + i)}), tt.holder(i), nil); err != nil {
						t.Fatal(err)
					}
				}
				w.mode = webhookRefused
				w.dryRunErr = func(string) error {
					return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
						Message: `admission webhook "services.scw-lb-ipam.io" denied the request: ` + tt.denial}}
				}
				out, err := w.run(t)
				lines := checkLines(t, out)
				if tt.retained == 0 {
					if err == nil {
						t.Fatalf("a pool full of what does not yield passed:\n%s", out)
					}
					if l := lines["webhook dry run"]; !strings.HasPrefix(l, "FAIL webhook dry run: ") || !strings.Contains(l, "the webhook answered and denied it") {
						t.Errorf("dry run line %q", l)
					}
					if l := lines["pool dc-link canary"]; write && !strings.HasPrefix(l, "FAIL pool dc-link canary: pool dc-link has no free address to book a canary in (10/10 used)") {
						t.Errorf("canary line %q", l)
					}
					return
				}
				if err != nil {
					t.Fatalf("a pool full of retained reservations fails preflight: %v\n%s", err, out)
				}
				if l := lines["pool dc-link full"]; !strings.HasPrefix(l, fmt.Sprintf("info pool dc-link full: all 10 addresses are booked, %d of them this cluster's reservations retained for deleted Services", tt.retained)) {
					t.Errorf("full line %q\n%s", l, out)
				}
				if l := lines["webhook dry run"]; !strings.HasPrefix(l, "ok  webhook dry run: the webhook answered") || !strings.Contains(l, "pool dc-link is full of retained reservations") || !strings.Contains(l, tt.denial) {
					t.Errorf("dry run line %q", l)
				}
				if write {
					if l := lines["pool dc-link canary"]; !strings.HasPrefix(l, "info pool dc-link canary: not booked") {
						t.Errorf("canary line %q", l)
					}
					if n := w.srv.Count(emulator.OpBookIP); n != 1 {
						t.Errorf("BookIP called %d times, want once (pool edge)", n)
					}
				}
			})
		}
	}
}
