package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// releaseNamespace is where scw-lb-ipam runs (default when unsaid).
func (o PreflightOptions) releaseNamespace() string {
	if o.ReleaseNamespace != "" {
		return o.ReleaseNamespace
	}
	return "default"
}

// kubeClient returns the cluster's client, built once; its warnings are
// collected, since the webhook answers a dry run with a warning only.
func (p *preflight) kubeClient() (client.Client, error) {
	if p.kube != nil || p.kubeErr != nil {
		return p.kube, p.kubeErr
	}
	if p.o.Kube != nil {
		p.kube = p.o.Kube
		return p.kube, nil
	}
	rc, err := restConfig(p.o.Kubeconfig)
	if err != nil {
		p.kubeErr = err
		return nil, err
	}
	w := &warningList{}
	rc.WarningHandler = w
	p.o.Warnings = w.list
	p.kube, p.kubeErr = client.New(rc, client.Options{})
	return p.kube, p.kubeErr
}

// warningList keeps the apiserver's warnings (admission warnings among them).
type warningList struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningList) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warningList) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

func (p *preflight) webhookConfiguration(ctx context.Context) {
	name := p.o.WebhookConfiguration
	kube, err := p.kubeClient()
	if err != nil {
		p.fail(checkWebhookConfig, err.Error(), "run preflight in the cluster (helm test <release>) or pass --kubeconfig")
		return
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &mwc); err != nil {
		if apierrors.IsNotFound(err) {
			p.fail(checkWebhookConfig, fmt.Sprintf("MutatingWebhookConfiguration %s does not exist", name),
				"install the chart, or pass --webhook-configuration with the name the chart gave it (its fullname: kubectl get mutatingwebhookconfigurations)")
			return
		}
		p.fail(checkWebhookConfig, fmt.Sprintf("reading MutatingWebhookConfiguration %s: %v", name, err), "allow get on it to the account preflight runs as (the chart's test RBAC does)")
		return
	}
	if len(mwc.Webhooks) == 0 {
		p.fail(checkWebhookConfig, fmt.Sprintf("MutatingWebhookConfiguration %s has no webhooks", name), "re-install the chart (helm upgrade --install)")
		return
	}
	var certs int
	var expires time.Time
	for _, wh := range mwc.Webhooks {
		p.webhooks = append(p.webhooks, wh.Name)
		if len(wh.ClientConfig.CABundle) == 0 {
			p.fail(checkWebhookConfig, fmt.Sprintf("webhook %s of %s has no caBundle: the apiserver cannot trust the webhook's certificate", wh.Name, name),
				"with tls.mode cert-manager, check cert-manager's cainjector and the Certificate (kubectl get certificate -n <release namespace>); with self-managed, the pods set it once running: check their logs")
			return
		}
		parsed, err := certutil.ParseCertsPEM(wh.ClientConfig.CABundle)
		if err != nil {
			p.fail(checkWebhookConfig, fmt.Sprintf("webhook %s of %s: the caBundle is not PEM certificates (%v)", wh.Name, name, err),
				"remove the caBundle so that cert-manager or the pods set it again: kubectl patch mutatingwebhookconfiguration "+name+" --type=json -p '[{\"op\":\"remove\",\"path\":\"/webhooks/0/clientConfig/caBundle\"}]'")
			return
		}
		certs += len(parsed)
		for _, c := range parsed {
			if expires.IsZero() || c.NotAfter.Before(expires) {
				expires = c.NotAfter
			}
		}
	}
	p.ok(checkWebhookConfig, fmt.Sprintf("%s: %d webhook(s), caBundle of %d certificate(s), first expiry %s", name, len(mwc.Webhooks), certs, expires.UTC().Format(time.RFC3339)))
}

// namespace finds the opted-in namespace of the dry run and a pool it may
// use by name.
func (p *preflight) namespace(ctx context.Context) *ipam.Pool {
	if !p.needs(checkNamespace, parsed) {
		return nil
	}
	kube, err := p.kubeClient()
	if err != nil {
		// The webhook configuration's line already says why.
		p.needs(checkNamespace, checkWebhookConfig)
		return nil
	}
	if p.o.Namespace != "" {
		return p.namedNamespace(ctx, kube, p.o.Namespace)
	}
	var list corev1.NamespaceList
	if err := kube.List(ctx, &list, client.MatchingLabels{request.LabelEnabled: "true"}); err != nil {
		p.fail(checkNamespace, fmt.Sprintf("listing the namespaces labelled %s: %v", optInLabel, err), "allow list on namespaces to the account preflight runs as (the chart's ClusterRole does), or pass --namespace")
		return nil
	}
	var names, noPool []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	for _, ns := range names {
		if slices.Contains(p.o.Excluded, ns) {
			continue
		}
		if pool := usablePool(p.cfg, ns); pool != nil {
			p.o.Namespace = ns
			p.ok(checkNamespace, fmt.Sprintf("%s (labelled %s), which may use pool %s", ns, optInLabel, pool.Name))
			return pool
		}
		noPool = append(noPool, ns)
	}
	if len(noPool) > 0 {
		p.fail(checkNamespace, fmt.Sprintf("the opted-in namespaces (%s) may use no pool by name", strings.Join(noPool, ", ")), "add one of them to a pool's namespaces in the pool file, or pass --namespace")
		return nil
	}
	p.fail(checkNamespace, "no namespace is opted in: the webhook ignores every Service", "label the namespaces of your LoadBalancer Services: kubectl label namespace <namespace> "+optInLabel)
	return nil
}

// optInLabel opts a namespace's Services in.
const optInLabel = request.LabelEnabled + "=true"

// usablePool is the first pool namespace ns may use by name: enabled, and
// assigning addresses itself.
func usablePool(cfg *ipam.Config, ns string) *ipam.Pool {
	for _, pool := range cfg.AllowedPools(ns) {
		if !pool.Disabled && pool.AutoAssigns() {
			return pool
		}
	}
	return nil
}

// namedNamespace checks the namespace --namespace names: it exists, is
// opted in, not excluded, and may use a pool by name.
func (p *preflight) namedNamespace(ctx context.Context, kube client.Client, ns string) *ipam.Pool {
	excluded, label := p.o.Excluded, optInLabel
	var obj corev1.Namespace
	if err := kube.Get(ctx, client.ObjectKey{Name: ns}, &obj); err != nil {
		p.fail(checkNamespace, fmt.Sprintf("--namespace %s: %v", ns, err), "name an existing namespace, or omit --namespace to take the first opted-in one")
		return nil
	}
	switch {
	case obj.Labels[request.LabelEnabled] != "true":
		p.fail(checkNamespace, fmt.Sprintf("namespace %s is not opted in (no label %s)", ns, label), "kubectl label namespace "+ns+" "+label)
	case slices.Contains(excluded, ns):
		p.fail(checkNamespace, fmt.Sprintf("namespace %s is excluded (%s): the webhook never sees it", ns, strings.Join(excluded, ", ")), "name an opted-in namespace of your workloads")
	case usablePool(p.cfg, ns) == nil:
		p.fail(checkNamespace, fmt.Sprintf("namespace %s may use no pool by name (enabled, autoAssign)", ns), "add it to a pool's namespaces in the pool file")
	default:
		pool := usablePool(p.cfg, ns)
		p.ok(checkNamespace, fmt.Sprintf("%s, which may use pool %s", ns, pool.Name))
		return pool
	}
	return nil
}

// dryRun creates a LoadBalancer Service server-side with dryRun: the
// webhook books nothing and answers with a warning saying what it would
// reserve. No warning means it was not called, e.g. failurePolicy Ignore
// while it is down.
func (p *preflight) dryRun(ctx context.Context, pool *ipam.Pool) {
	if !p.needs(checkDryRun, checkWebhookConfig, checkNamespace) {
		return
	}
	kube, _ := p.kubeClient()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	// A name of its own, not generateName: the webhook needs the name for
	// sticky identity and denies Services without one.
	name := PreflightCanaryName + "-" + hex.EncodeToString(suffix)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.o.Namespace, Name: name, Annotations: map[string]string{
			request.AnnotationPool: pool.Name,
			ccm.AnnotationPrivate:  "true",
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "probe", Port: 80}}},
	}
	var before int
	if p.o.Warnings != nil {
		before = len(p.o.Warnings())
	}
	err := kube.Create(ctx, svc, client.DryRunAll)
	var warnings []string
	if p.o.Warnings != nil {
		warnings = p.o.Warnings()[before:]
	}
	where := fmt.Sprintf("a dry-run create of LoadBalancer Service %s/%s (pool %s)", p.o.Namespace, name, pool.Name)
	if _, yielding := p.yielding[pool.Name]; yielding && err != nil && deniedAsFull(err, p.webhooks, pool) {
		p.ok(checkDryRun, fmt.Sprintf("the webhook answered %s in %s: pool %s is full of retained reservations (see %s), and it denied the dry run as a CREATE would be asked to wait for the oldest's early release: %s", name, p.o.Namespace, pool.Name, poolFullCheck(pool.Name), err))
		return
	}
	if err != nil {
		problem, fix := p.dryRunFailure(err)
		p.fail(checkDryRun, where+": "+problem, fix)
		return
	}
	for _, w := range warnings {
		if strings.HasPrefix(w, "scw-lb-ipam: dry run:") {
			p.ok(checkDryRun, fmt.Sprintf("the webhook answered %s in %s: %q", name, p.o.Namespace, w))
			return
		}
	}
	p.fail(checkDryRun, fmt.Sprintf("%s was admitted without the webhook's warning: the webhook did not answer (failurePolicy Ignore lets Services through while it is down) or does not select namespace %s", where, p.o.Namespace),
		"check the webhook's pods and logs, and the namespaceSelector of MutatingWebhookConfiguration "+p.o.WebhookConfiguration)
}

// quotaExceeded is the ResourceQuota admission plugin's denial.
var quotaExceeded = regexp.MustCompile(`exceeded quota: ([^,]+)`)

// webhookNamed finds the webhook an admission error names, as in
// `failed calling webhook "x"` and `admission webhook "x" denied`.
var webhookNamed = regexp.MustCompile(`(failed calling webhook|admission webhook) "([^"]+)"`)

// deniedAsFull reports whether err is one of webhooks' denials of the dry
// run saying that pool is full: its words for a pool with this cluster's
// retained reservations among the holders, where a CREATE would make room
// (an exhausted pool's are others).
func deniedAsFull(err error, webhooks []string, pool *ipam.Pool) bool {
	msg := err.Error()
	m := webhookNamed.FindStringSubmatch(msg)
	return m != nil && m[1] == "admission webhook" && slices.Contains(webhooks, m[2]) && strings.Contains(msg, ipam.FullPool(pool.Name))
}

// dryRunFailure says who refused the dry run, from the apiserver's error:
// our webhook, another webhook or policy, a ResourceQuota, or RBAC.
func (p *preflight) dryRunFailure(err error) (problem, fix string) {
	msg := err.Error()
	if m := webhookNamed.FindStringSubmatch(msg); m != nil {
		ours := slices.Contains(p.webhooks, m[2])
		switch {
		case ours && m[1] == "failed calling webhook":
			return "the apiserver could not call the webhook: " + msg,
				"check the webhook's pods (kubectl -n <release namespace> get pods,endpoints), that the apiserver reaches them on the webhook port, and that the caBundle signs their certificate"
		case ours:
			return "the webhook answered and denied it: " + msg, "follow the denial's own fix (docs/troubleshooting.md)"
		case m[1] == "failed calling webhook":
			return fmt.Sprintf("webhook %s, not scw-lb-ipam's, could not be called: %s", m[2], msg),
				fmt.Sprintf("that webhook fails LoadBalancer Services in namespace %s too: check it (kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations), or pass --namespace (helm: tests.preflight.namespace) of a namespace it does not select", p.o.Namespace)
		default:
			return fmt.Sprintf("webhook %s, not scw-lb-ipam's, denied it: %s", m[2], msg),
				fmt.Sprintf("that webhook's policy refuses a LoadBalancer Service with annotations %s and %s in namespace %s: ask its owner, or pass --namespace (helm: tests.preflight.namespace) of a namespace it allows", request.AnnotationPool, ccm.AnnotationPrivate, p.o.Namespace)
		}
	}
	if m := quotaExceeded.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("ResourceQuota %s of namespace %s refuses it (a dry run is counted as a create): %s", m[1], p.o.Namespace, msg),
			fmt.Sprintf("raise the quota's services.loadbalancers (kubectl -n %s describe resourcequota %s), or pass --namespace (helm: tests.preflight.namespace) of a namespace with room", p.o.Namespace, m[1])
	}
	if strings.Contains(msg, "ValidatingAdmissionPolicy") {
		return "a ValidatingAdmissionPolicy refuses it: " + msg,
			"that policy refuses the LoadBalancer Service too (kubectl get validatingadmissionpolicies,validatingadmissionpolicybindings): ask its owner, or pass --namespace (helm: tests.preflight.namespace) of a namespace it does not cover"
	}
	if apierrors.IsForbidden(err) && strings.Contains(msg, "cannot create resource") {
		return "the account preflight runs as may not create Services there: " + msg,
			"allow create on services in namespace " + p.o.Namespace + " to that account (helm test's own RBAC does, in tests.preflight.namespace when set)"
	}
	return "the apiserver refused it: " + msg, "read the apiserver's message above: it names what refused the Service"
}
