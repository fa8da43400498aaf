package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var modes = []struct {
	name   string
	values string
}{
	{"self-managed", "ci/self-managed-values.yaml"},
	{"cert-manager", "ci/cert-manager-values.yaml"},
	{"cert-manager with issuerRef", "ci/cert-manager-issuer-values.yaml"},
}

// overrides sets every value a real cluster may set, at once (names,
// image digest, ServiceAccount, scheduling, metrics, extra flags): linted
// and applied as a server-side dry run with the modes.
var overrides = struct{ name, values string }{"every override", "ci/overrides-values.yaml"}

func TestLint(t *testing.T) {
	for _, m := range append(modes, overrides) {
		out, err := helm(t, "lint", "--strict", chartDir, "--values", chartDir+"/"+m.values)
		if err != nil || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("%s: helm lint: %v\n%s", m.name, err, out)
		}
	}
}

func TestWebhookConfiguration(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			objs := render(t, []string{m.values})
			hook := webhookOf(t, objs)
			if hook["sideEffects"] != "NoneOnDryRun" {
				t.Errorf("sideEffects %v", hook["sideEffects"])
			}
			exprs := hook["namespaceSelector"].(map[string]any)["matchExpressions"].([]any)
			var optIn, excluded bool
			for _, e := range exprs {
				e := e.(map[string]any)
				vals := e["values"].([]any)
				switch {
				case e["key"] == "scw-lb-ipam.io/enabled" && e["operator"] == "In" && slices.Equal(vals, []any{"true"}):
					optIn = true
				case e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn":
					excluded = slices.Contains(vals, any(namespace)) && slices.Contains(vals, any("kube-system"))
				}
			}
			if !optIn || !excluded {
				t.Errorf("namespaceSelector %v: opt-in=%v release and kube-system excluded=%v", exprs, optIn, excluded)
			}
			conds := hook["matchConditions"].([]any)
			if len(conds) != 3 || !strings.Contains(conds[0].(map[string]any)["expression"].(string), `object.spec.type == "LoadBalancer"`) ||
				conds[1].(map[string]any)["expression"] != `!has(object.spec.loadBalancerClass)` ||
				!strings.Contains(conds[2].(map[string]any)["expression"].(string), `!has(oldObject.metadata.deletionTimestamp)`) {
				t.Errorf("matchConditions %v", conds)
			}
			cc := hook["clientConfig"].(map[string]any)
			if _, ok := cc["caBundle"]; ok {
				t.Error("a rendered caBundle would be reset by every helm upgrade")
			}
			svc := cc["service"].(map[string]any)
			if svc["name"] != release || svc["namespace"] != namespace || svc["path"] != "/mutate-v1-service" {
				t.Errorf("clientConfig.service %v", svc)
			}
			inject := one(t, objs, "MutatingWebhookConfiguration").GetAnnotations()["cert-manager.io/inject-ca-from"]
			if cm := strings.HasPrefix(m.name, "cert-manager"); cm != (inject == namespace+"/"+release+"-serving") || (!cm && inject != "") {
				t.Errorf("inject-ca-from %q in mode %s", inject, m.name)
			}
		})
	}
}

func TestValuesFlowIntoTheWebhook(t *testing.T) {
	def := webhookOf(t, render(t, []string{"ci/self-managed-values.yaml"}))
	if def["failurePolicy"] != "Fail" || fmt.Sprint(def["timeoutSeconds"]) != "10" {
		t.Errorf("defaults: failurePolicy %v timeoutSeconds %v", def["failurePolicy"], def["timeoutSeconds"])
	}
	set := webhookOf(t, render(t, []string{"ci/self-managed-values.yaml"}, "webhook.failurePolicy=Ignore", "webhook.timeoutSeconds=4"))
	if set["failurePolicy"] != "Ignore" || fmt.Sprint(set["timeoutSeconds"]) != "4" {
		t.Errorf("set: failurePolicy %v timeoutSeconds %v", set["failurePolicy"], set["timeoutSeconds"])
	}
}

func TestPDBOnlyWithReplicas(t *testing.T) {
	for replicas, want := range map[string]int{"1": 0, "2": 1, "3": 1} {
		objs := render(t, []string{"ci/self-managed-values.yaml"}, "replicaCount="+replicas)
		if got := len(find(objs, "PodDisruptionBudget")); got != want {
			t.Errorf("replicaCount %s: %d PDBs, want %d", replicas, got, want)
		}
	}
	if n := len(find(render(t, []string{"ci/self-managed-values.yaml"}, "podDisruptionBudget.enabled=false"), "PodDisruptionBudget")); n != 0 {
		t.Errorf("disabled PDB rendered")
	}
}

func TestModeSpecificObjectsAndRBAC(t *testing.T) {
	hasRule := func(objs []*unstructured.Unstructured, kind, resource string) bool {
		for _, r := range field(t, named(t, objs, kind, release), "rules").([]any) {
			if slices.Contains(r.(map[string]any)["resources"].([]any), any(resource)) {
				return true
			}
		}
		return false
	}
	self := render(t, []string{"ci/self-managed-values.yaml"})
	if len(find(self, "Certificate"))+len(find(self, "Issuer")) != 0 {
		t.Error("cert-manager objects in self-managed mode")
	}
	if !hasRule(self, "ClusterRole", "mutatingwebhookconfigurations") || !hasRule(self, "Role", "secrets") {
		t.Error("self-managed mode lacks the rights to keep its Secret and caBundle")
	}
	listsEvents := false
	for _, r := range field(t, named(t, self, "ClusterRole", release), "rules").([]any) {
		rule := r.(map[string]any)
		listsEvents = listsEvents || slices.Contains(rule["apiGroups"].([]any), any("events.k8s.io")) &&
			slices.Contains(rule["resources"].([]any), any("events")) && slices.Contains(rule["verbs"].([]any), any("list"))
	}
	if !listsEvents {
		t.Error("the ClusterRole does not list events.k8s.io Events: the sweeper's leader cannot restore its convergence monitor")
	}
	if args := containerArgs(t, self); !slices.Contains(args, "--tls-mode=self-managed") {
		t.Errorf("args %v", args)
	}

	cm := render(t, []string{"ci/cert-manager-values.yaml"})
	if len(find(cm, "Certificate")) != 2 || len(find(cm, "Issuer")) != 2 {
		t.Errorf("cert-manager chain: %d Certificates, %d Issuers, want 2 and 2", len(find(cm, "Certificate")), len(find(cm, "Issuer")))
	}
	if hasRule(cm, "ClusterRole", "mutatingwebhookconfigurations") || hasRule(cm, "Role", "secrets") {
		t.Error("cert-manager mode grants rights it does not need")
	}
	if len(find(cm, "ServiceMonitor")) != 1 {
		t.Error("serviceMonitor.enabled rendered no ServiceMonitor")
	}

	issuer := render(t, []string{"ci/cert-manager-issuer-values.yaml"})
	certs := find(issuer, "Certificate")
	if len(certs) != 1 || len(find(issuer, "Issuer")) != 0 {
		t.Fatalf("with issuerRef: %d Certificates, %d Issuers, want 1 and 0", len(certs), len(find(issuer, "Issuer")))
	}
	if ref := field(t, certs[0], "spec", "issuerRef").(map[string]any); ref["name"] != "corp-ca" || ref["kind"] != "ClusterIssuer" {
		t.Errorf("issuerRef %v", ref)
	}
}

func TestHardenedPod(t *testing.T) {
	objs := render(t, []string{"ci/self-managed-values.yaml"})
	d := one(t, objs, "Deployment")
	pod := field(t, d, "spec", "template", "spec").(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	sc := c["securityContext"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false ||
		!slices.Equal(sc["capabilities"].(map[string]any)["drop"].([]any), []any{"ALL"}) ||
		pod["securityContext"].(map[string]any)["runAsNonRoot"] != true {
		t.Errorf("security context %v / %v", sc, pod["securityContext"])
	}
	if c["resources"].(map[string]any)["limits"] == nil || c["livenessProbe"] == nil || c["readinessProbe"] == nil {
		t.Error("missing limits or probes")
	}
	res := c["resources"].(map[string]any)
	if req := res["requests"].(map[string]any); req["cpu"] != "50m" || req["memory"] != "96Mi" || res["limits"].(map[string]any)["memory"] != "256Mi" {
		t.Errorf("default resources %v, want requests 50m/96Mi, limit 256Mi", res)
	}
	if _, ok := pod["priorityClassName"]; ok {
		t.Errorf("a priority class by default: %v", pod["priorityClassName"])
	}
	if len(pod["topologySpreadConstraints"].([]any)) == 0 {
		t.Error("no topology spread")
	}
	if fmt.Sprint(field(t, d, "spec", "replicas")) != "2" {
		t.Error("default replicas is not 2")
	}
}

func TestSchemaAndValidationRejections(t *testing.T) {
	base := []string{"ci/self-managed-values.yaml"}
	for _, tt := range []struct {
		name string
		sets []string
		want string
	}{
		{"unknown key", []string{"colour=blue"}, "colour"},
		{"unknown nested key", []string{"webhook.retries=3"}, "retries"},
		{"wrong type", []string{"replicaCount=two"}, "replicaCount"},
		{"bad failurePolicy", []string{"webhook.failurePolicy=Maybe"}, "failurePolicy"},
		{"bad tls mode", []string{"tls.mode=magic"}, "mode"},
		{"bad region", []string{"config.region=mars-1"}, "region"},
		{"missing clusterName", []string{"config.clusterName="}, "config.clusterName is required"},
		{"both credential sources", []string{"scaleway.accessKey=SCWABCDEFGHIJKLMNOPQ", "scaleway.secretKey=x"}, "mutually exclusive"},
		{"bad nameOverride", []string{"nameOverride=Not_A_Name"}, "nameOverride"},
		{"bad fullnameOverride", []string{"fullnameOverride=edge.ipam"}, "fullnameOverride"},
		{"tag as digest", []string{"image.digest=latest"}, "digest"},
		{"short digest", []string{"image.digest=sha256:abc"}, "digest"},
		{"serviceAccount.create not a boolean", []string{"serviceAccount.create=maybe"}, "create"},
		{"unknown serviceAccount key", []string{"serviceAccount.automount=true"}, "automount"},
		{"serviceAccount annotation not a string", []string{"serviceAccount.annotations.x=1"}, "annotations"},
		{"no ServiceAccount and no name", []string{"serviceAccount.create=false"}, "set serviceAccount.name"},
		{"podAnnotations not a map", []string{"podAnnotations=x"}, "podAnnotations"},
		{"podLabels value not a string", []string{"podLabels.tier=1"}, "podLabels"},
		{"unknown resources key", []string{"resources.cpu=1"}, "cpu"},
		{"nodeSelector not a map", []string{"nodeSelector=linux"}, "nodeSelector"},
		{"tolerations not a list", []string{"tolerations=all"}, "tolerations"},
		{"affinity not a map", []string{"affinity=close"}, "affinity"},
		{"topologySpreadConstraints not a list", []string{"topologySpreadConstraints=zone"}, "topologySpreadConstraints"},
		{"priorityClassName not a string", []string{"priorityClassName=5"}, "priorityClassName"},
		{"extraArgs not a list", []string{"extraArgs=--v=2"}, "extraArgs"},
		{"extraArgs item not a flag", []string{"extraArgs[0]=serve"}, "extraArgs"},
		{"extraEnv item without a name", []string{"extraEnv[0].value=x"}, "missing property 'name'"},
		{"enableHTTP2 not a boolean", []string{"enableHTTP2=sometimes"}, "enableHTTP2"},
		{"metrics.port not a number", []string{"metrics.port=https"}, "port"},
		{"metrics.port privileged", []string{"metrics.port=443"}, "port"},
		{"metrics.secure not a boolean", []string{"metrics.secure=yes"}, "secure"},
		{"unknown metrics key", []string{"metrics.path=/m"}, "path"},
		{"metrics.port on the webhook's", []string{"metrics.port=9443"}, "metrics.port 9443 is taken"},
		{"metrics.port on the probes'", []string{"metrics.port=8081"}, "metrics.port 8081 is taken"},
		{"serviceMonitor.authorization without a key", []string{"serviceMonitor.authorization.credentials.name=x"}, "key"},
		{"serviceMonitor.tlsConfig not a map", []string{"serviceMonitor.tlsConfig=insecure"}, "tlsConfig"},
		{"adoptFrom item not a cluster name", []string{"config.pools[0].adoptFrom[0]=Old_One"}, "adoptFrom"},
	} {
		out, err := renderRaw(t, base, tt.sets...)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s: accepted or unclear (err=%v):\n%s", tt.name, err, out)
		}
	}
	// A pool without its Private Network, as a user would write it.
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte("config:\n  pools:\n    - name: dc-link\n      subnet: 172.16.4.0/22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := renderRaw(t, []string{"ci/self-managed-values.yaml", file})
	if err == nil || !strings.Contains(out, "missing property 'privateNetworkID'") {
		t.Errorf("pool without privateNetworkID: accepted or unclear (err=%v):\n%s", err, out)
	}
}

// TestImage: repository:tag by default, the chart's appVersion as the tag;
// a digest wins over any tag.
func TestImage(t *testing.T) {
	base := []string{"ci/self-managed-values.yaml"}
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		sets []string
		want string
	}{
		{nil, "ghcr.io/scw-lb-ipam/scw-lb-ipam:0.1.0"},
		{[]string{"image.tag=1.2.3"}, "ghcr.io/scw-lb-ipam/scw-lb-ipam:1.2.3"},
		{[]string{"image.digest=" + digest}, "ghcr.io/scw-lb-ipam/scw-lb-ipam@" + digest},
		{[]string{"image.tag=1.2.3", "image.digest=" + digest, "image.repository=registry.example.com/scw-lb-ipam"}, "registry.example.com/scw-lb-ipam@" + digest},
	} {
		if got := container(t, render(t, base, tt.sets...))["image"]; got != tt.want {
			t.Errorf("%v: image %v, want %s", tt.sets, got, tt.want)
		}
	}
}

// TestNameOverrides: fullnameOverride renames every object, and every
// reference follows: the webhook still reaches its Service, the flags name
// the renamed webhook configuration, Secret and Service, RBAC binds the
// renamed ServiceAccount and grants on the renamed objects. The view's
// CustomResourceDefinitions keep the names their API gives them.
func TestNameOverrides(t *testing.T) {
	const full = "edge-ipam"
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			objs := render(t, []string{m.values}, "fullnameOverride="+full)
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					continue // named by the API they serve: <plural>.scw-lb-ipam.io
				}
				if o.GetName() != full && !strings.HasPrefix(o.GetName(), full+"-") {
					t.Errorf("%s %s not renamed", o.GetKind(), o.GetName())
				}
			}
			svc := one(t, objs, "Service")
			ref := webhookOf(t, objs)["clientConfig"].(map[string]any)["service"].(map[string]any)
			if ref["name"] != svc.GetName() || ref["namespace"] != namespace {
				t.Errorf("the webhook calls Service %v/%v, the chart renders %s", ref["namespace"], ref["name"], svc.GetName())
			}
			mwc := one(t, objs, "MutatingWebhookConfiguration")
			args := containerArgs(t, objs)
			for _, want := range []string{"--webhook-service=" + svc.GetName(), "--webhook-config=" + mwc.GetName(), "--tls-secret=" + full + "-tls"} {
				if !slices.Contains(args, want) {
					t.Errorf("args lack %s: %v", want, args)
				}
			}
			sa := one(t, installed(objs), "ServiceAccount").GetName()
			if got := podSpec(t, objs)["serviceAccountName"]; got != sa {
				t.Errorf("pods run as %v, the chart renders ServiceAccount %s", got, sa)
			}
			for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				for _, b := range find(installed(objs), kind) {
					subj := field(t, b, "subjects").([]any)[0].(map[string]any)
					if subj["name"] != sa || subj["namespace"] != namespace {
						t.Errorf("%s %s binds %v", kind, b.GetName(), subj)
					}
					roleKind := strings.TrimSuffix(kind, "Binding")
					named(t, objs, roleKind, field(t, b, "roleRef", "name").(string)) // the role it binds exists
				}
			}
			if selector := field(t, svc, "spec", "selector").(map[string]any); !subset(selector, field(t, one(t, objs, "Deployment"), "spec", "template", "metadata", "labels").(map[string]any)) {
				t.Errorf("Service selector %v does not select the pods", selector)
			}
			cm := one(t, objs, "ConfigMap").GetName()
			var tlsVolume any
			for _, v := range podSpec(t, objs)["volumes"].([]any) {
				v := v.(map[string]any)
				switch v["name"] {
				case "config":
					if v["configMap"].(map[string]any)["name"] != cm {
						t.Errorf("config volume %v, ConfigMap %s", v, cm)
					}
				case "certs":
					tlsVolume = v["secret"]
				}
			}
			if strings.HasPrefix(m.name, "cert-manager") {
				if inject := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; inject != namespace+"/"+full+"-serving" {
					t.Errorf("inject-ca-from %q", inject)
				}
				cert := named(t, objs, "Certificate", full+"-serving")
				if field(t, cert, "spec", "secretName") != full+"-tls" || !slices.Contains(field(t, cert, "spec", "dnsNames").([]any), any(svc.GetName()+"."+namespace+".svc")) {
					t.Errorf("serving Certificate %v", cert.Object["spec"])
				}
				if tlsVolume == nil || tlsVolume.(map[string]any)["secretName"] != full+"-tls" {
					t.Errorf("certs volume %v", tlsVolume)
				}
			} else {
				rules := field(t, named(t, objs, "ClusterRole", full), "rules").([]any)
				if !slices.ContainsFunc(rules, func(r any) bool {
					names, _ := r.(map[string]any)["resourceNames"].([]any)
					return slices.Equal(names, []any{mwc.GetName()})
				}) {
					t.Errorf("the ClusterRole does not grant on MutatingWebhookConfiguration %s: %v", mwc.GetName(), rules)
				}
				rules = field(t, named(t, objs, "Role", full), "rules").([]any)
				if !slices.ContainsFunc(rules, func(r any) bool {
					names, _ := r.(map[string]any)["resourceNames"].([]any)
					return slices.Equal(names, []any{full + "-tls"})
				}) {
					t.Errorf("the Role does not grant on Secret %s-tls: %v", full, rules)
				}
			}
		})
	}

	// nameOverride renames the app label and, appended to the release
	// name, the objects.
	objs := render(t, []string{"ci/self-managed-values.yaml"}, "nameOverride=lbipam")
	if name := one(t, objs, "Service").GetName(); name != release+"-lbipam" {
		t.Errorf("with nameOverride the Service is %s, want %s-lbipam", name, release)
	}
	if l := field(t, one(t, objs, "Deployment"), "spec", "template", "metadata", "labels").(map[string]any)["app.kubernetes.io/name"]; l != "lbipam" {
		t.Errorf("app.kubernetes.io/name %v", l)
	}
}

func subset(small, big map[string]any) bool {
	for k, v := range small {
		if big[k] != v {
			return false
		}
	}
	return len(small) > 0
}

// TestServiceAccountValues: a created ServiceAccount carries its
// annotations; with create false the pods run as the named one, no
// ServiceAccount is rendered and the RBAC binds the named one.
func TestServiceAccountValues(t *testing.T) {
	base := []string{"ci/self-managed-values.yaml"}
	objs := render(t, base, "serviceAccount.annotations.iam\\.example\\.com/role=webhook")
	if a := one(t, installed(objs), "ServiceAccount").GetAnnotations(); a["iam.example.com/role"] != "webhook" {
		t.Errorf("ServiceAccount annotations %v", a)
	}
	objs = render(t, base, "serviceAccount.create=true", "serviceAccount.name=ipam-sa")
	if sa := one(t, installed(objs), "ServiceAccount").GetName(); sa != "ipam-sa" || podSpec(t, objs)["serviceAccountName"] != "ipam-sa" {
		t.Errorf("named ServiceAccount %s, pods run as %v", sa, podSpec(t, objs)["serviceAccountName"])
	}

	objs = render(t, base, "serviceAccount.create=false", "serviceAccount.name=existing")
	if n := len(find(installed(objs), "ServiceAccount")); n != 0 {
		t.Errorf("%d ServiceAccounts rendered with create false", n)
	}
	if got := podSpec(t, objs)["serviceAccountName"]; got != "existing" {
		t.Errorf("pods run as %v, want existing", got)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range find(installed(objs), kind) {
			if subj := field(t, b, "subjects").([]any)[0].(map[string]any); subj["name"] != "existing" {
				t.Errorf("%s %s binds %v", kind, b.GetName(), subj["name"])
			}
		}
	}
}

// TestPodValues: scheduling, priority, annotations, labels, resources and
// extra flags and variables reach the pod; the default spread is replaced
// by topologySpreadConstraints, not added to.
func TestPodValues(t *testing.T) {
	objs := render(t, []string{overrides.values})
	pod := podSpec(t, objs)
	c := container(t, objs)
	meta := field(t, one(t, objs, "Deployment"), "spec", "template", "metadata").(map[string]any)
	checks := []struct {
		what string
		ok   bool
	}{
		{"nodeSelector", pod["nodeSelector"].(map[string]any)["kubernetes.io/os"] == "linux"},
		{"tolerations", len(pod["tolerations"].([]any)) == 1 && pod["tolerations"].([]any)[0].(map[string]any)["key"] == "node-role.kubernetes.io/control-plane"},
		{"affinity", pod["affinity"].(map[string]any)["nodeAffinity"] != nil},
		{"topologySpreadConstraints replace the default", len(pod["topologySpreadConstraints"].([]any)) == 1 &&
			pod["topologySpreadConstraints"].([]any)[0].(map[string]any)["topologyKey"] == "topology.kubernetes.io/zone"},
		{"priorityClassName", pod["priorityClassName"] == "scw-lb-ipam"},
		{"podAnnotations", meta["annotations"].(map[string]any)["example.com/note"] == "overrides" && meta["annotations"].(map[string]any)["checksum/scaleway"] != nil},
		{"podLabels", meta["labels"].(map[string]any)["team"] == "platform" && meta["labels"].(map[string]any)["app.kubernetes.io/name"] == "lbipam"},
		{"resources", c["resources"].(map[string]any)["requests"].(map[string]any)["cpu"] == "100m" && c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] == "512Mi"},
		{"image digest", c["image"] == "registry.example.com/mirror/scw-lb-ipam@sha256:4b825dc642cb6eb9a060e54bf8d69288fbee4904c8f5e1a7d2b3c4d5e6f70819"},
		{"extraEnv", slices.ContainsFunc(c["env"].([]any), func(e any) bool {
			return e.(map[string]any)["name"] == "GOMEMLIMIT" && e.(map[string]any)["value"] == "200MiB"
		})},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s not rendered as set", ch.what)
		}
	}
	// Extra flags come last, so they win over the chart's own.
	args := containerArgs(t, objs)
	if args[len(args)-1] != "--occupancy-ttl=2m" {
		t.Errorf("extraArgs not last: %v", args)
	}
	if pod := podSpec(t, render(t, []string{"ci/self-managed-values.yaml"})); pod["tolerations"] != nil || pod["nodeSelector"] != nil || pod["affinity"] != nil {
		t.Errorf("scheduling constraints by default: %v %v %v", pod["tolerations"], pod["nodeSelector"], pod["affinity"])
	}
}

// TestMetricsValues: secure metrics by default (HTTPS on 8443, the RBAC the
// authentication filter needs, a reader role for scrapers, a ServiceMonitor
// that sends a token over HTTPS); the port follows metrics.port everywhere;
// metrics.secure=false serves plain HTTP and grants nothing for it.
func TestMetricsValues(t *testing.T) {
	base := []string{"ci/self-managed-values.yaml"}
	objs := render(t, base, "serviceMonitor.enabled=true")
	args := containerArgs(t, objs)
	for _, want := range []string{"--metrics-bind-address=:8443", "--metrics-secure=true", "--enable-http2=false"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
	if c, s := containerPort(t, objs, "metrics"), servicePort(t, objs, "metrics"); c != 8443 || s != 8443 {
		t.Errorf("metrics ports: container %d, Service %d, want 8443", c, s)
	}
	auth := named(t, objs, "ClusterRole", release+"-metrics-auth")
	var granted []string
	for _, r := range field(t, auth, "rules").([]any) {
		r := r.(map[string]any)
		for _, res := range r["resources"].([]any) {
			granted = append(granted, fmt.Sprintf("%v/%v:%v", r["apiGroups"].([]any)[0], res, r["verbs"]))
		}
	}
	slices.Sort(granted)
	if want := []string{"authentication.k8s.io/tokenreviews:[create]", "authorization.k8s.io/subjectaccessreviews:[create]"}; !slices.Equal(granted, want) {
		t.Errorf("metrics-auth grants %v, want %v", granted, want)
	}
	binding := named(t, objs, "ClusterRoleBinding", release+"-metrics-auth")
	if subj := field(t, binding, "subjects").([]any)[0].(map[string]any); subj["name"] != release || field(t, binding, "roleRef", "name") != auth.GetName() {
		t.Errorf("metrics-auth binding %v", binding.Object)
	}
	reader := field(t, named(t, objs, "ClusterRole", release+"-metrics-reader"), "rules").([]any)
	if r := reader[0].(map[string]any); len(reader) != 1 || !slices.Equal(r["nonResourceURLs"].([]any), []any{"/metrics"}) || !slices.Equal(r["verbs"].([]any), []any{"get"}) {
		t.Errorf("metrics-reader rules %v", reader)
	}
	ep := field(t, one(t, objs, "ServiceMonitor"), "spec", "endpoints").([]any)[0].(map[string]any)
	if ep["scheme"] != "https" || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" || ep["port"] != "metrics" ||
		ep["tlsConfig"].(map[string]any)["insecureSkipVerify"] != true {
		t.Errorf("ServiceMonitor endpoint %v", ep)
	}
	notes, err := helm(t, "install", release, chartDir, "--namespace", namespace, "--values", filepath.Join(chartDir, base[0]), "--dry-run=client")
	if err != nil || !strings.Contains(notes, "https://"+release+"."+namespace+".svc:8443/metrics, for callers allowed by\nClusterRole "+release+"-metrics-reader") {
		t.Errorf("NOTES do not say where the metrics are and who may read them (err=%v):\n%s", err, notes)
	}

	// A tlsConfig replaces insecureSkipVerify, an authorization the token
	// file.
	objs = render(t, base, "serviceMonitor.enabled=true", "serviceMonitor.tlsConfig.serverName=scw-lb-ipam.scw-lb-ipam.svc",
		"serviceMonitor.authorization.type=Bearer", "serviceMonitor.authorization.credentials.name=prometheus-token", "serviceMonitor.authorization.credentials.key=token")
	ep = field(t, one(t, objs, "ServiceMonitor"), "spec", "endpoints").([]any)[0].(map[string]any)
	if tc := ep["tlsConfig"].(map[string]any); tc["serverName"] != "scw-lb-ipam.scw-lb-ipam.svc" || tc["insecureSkipVerify"] != nil {
		t.Errorf("tlsConfig %v", tc)
	}
	if auth, _ := ep["authorization"].(map[string]any); ep["bearerTokenFile"] != nil || auth == nil || auth["credentials"].(map[string]any)["name"] != "prometheus-token" {
		t.Errorf("authorization %v, bearerTokenFile %v", ep["authorization"], ep["bearerTokenFile"])
	}

	// Plain HTTP on another port, HTTP/2 allowed.
	objs = render(t, base, "serviceMonitor.enabled=true", "metrics.secure=false", "metrics.port=9090", "enableHTTP2=true")
	args = containerArgs(t, objs)
	for _, want := range []string{"--metrics-bind-address=:9090", "--metrics-secure=false", "--enable-http2=true"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
	if c, s := containerPort(t, objs, "metrics"), servicePort(t, objs, "metrics"); c != 9090 || s != 9090 {
		t.Errorf("metrics ports: container %d, Service %d, want 9090", c, s)
	}
	for _, o := range find(objs, "ClusterRole") {
		if strings.Contains(o.GetName(), "metrics") {
			t.Errorf("ClusterRole %s rendered for plain HTTP metrics", o.GetName())
		}
	}
	ep = field(t, one(t, objs, "ServiceMonitor"), "spec", "endpoints").([]any)[0].(map[string]any)
	if ep["scheme"] != "http" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
		t.Errorf("plain HTTP ServiceMonitor endpoint %v", ep)
	}
}

// TestConvergenceGraceValue: sweeper.convergenceGrace reaches the flag, and
// the schema refuses what the binary would refuse at start (no grace, a
// unit Go's durations do not have) before anything is installed.
func TestConvergenceGraceValue(t *testing.T) {
	base := []string{"ci/self-managed-values.yaml"}
	if args := containerArgs(t, render(t, base)); !slices.Contains(args, "--convergence-grace=5m") {
		t.Errorf("default: args %v lack --convergence-grace=5m", args)
	}
	if args := containerArgs(t, render(t, base, "sweeper.convergenceGrace=90s")); !slices.Contains(args, "--convergence-grace=90s") {
		t.Errorf("set: args %v lack --convergence-grace=90s", args)
	}
	for _, bad := range []string{"0s", "0m0s", "1d", "soon"} {
		if out, err := renderRaw(t, base, "sweeper.convergenceGrace="+bad); err == nil || !strings.Contains(out, "convergenceGrace") {
			t.Errorf("sweeper.convergenceGrace=%s rendered (err %v):\n%.300s", bad, err, out)
		}
	}
}

// TestSchemaAcceptsAdoptFrom: a pool's adoptFrom reaches the pool file.
func TestSchemaAcceptsAdoptFrom(t *testing.T) {
	out, err := renderRaw(t, []string{"ci/self-managed-values.yaml"}, "config.pools[0].adoptFrom[0]=prod-par-old")
	if err != nil || !strings.Contains(out, "prod-par-old") {
		t.Fatalf("adoptFrom refused or dropped (err=%v):\n%s", err, out)
	}
}

// TestSchemaAcceptsRetentionZero: "not sticky" as docs/pool-file.md writes
// it, retention 0 unquoted, "0" or "0s", passes the schema and reaches the
// pool file; a bare number other than 0 is refused.
func TestSchemaAcceptsRetentionZero(t *testing.T) {
	dir := t.TempDir()
	for i, v := range []string{"0", `"0"`, "0s"} {
		f := filepath.Join(dir, fmt.Sprintf("retention-%d.yaml", i))
		if err := os.WriteFile(f, []byte("config:\n  pools:\n    - {name: dc-link, privateNetworkID: 8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f, retention: "+v+"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := renderRaw(t, []string{"ci/self-managed-values.yaml", f})
		if err != nil || !strings.Contains(out, "retention:") {
			t.Errorf("retention: %s refused or dropped (err=%v):\n%.400s", v, err, out)
		}
	}
	if out, err := renderRaw(t, []string{"ci/self-managed-values.yaml"}, "config.pools[0].retention=3600"); err == nil {
		t.Errorf("retention: 3600 rendered:\n%.300s", out)
	}
}

// TestKubeSystemAlwaysExcluded: the webhook's namespaceSelector leaves out
// kube-system and the release namespace whatever webhook.excludedNamespaces
// says, as the binary does; the list adds to them, each once.
func TestKubeSystemAlwaysExcluded(t *testing.T) {
	for set, want := range map[string][]any{
		"webhook.excludedNamespaces=null":                {"kube-system", namespace},
		"webhook.excludedNamespaces={batch,kube-system}": {"kube-system", namespace, "batch"},
	} {
		objs := render(t, []string{"ci/self-managed-values.yaml"}, set)
		exprs := field(t, one(t, objs, "MutatingWebhookConfiguration"), "webhooks").([]any)[0].(map[string]any)["namespaceSelector"].(map[string]any)["matchExpressions"].([]any)
		var got []any
		for _, e := range exprs {
			if m := e.(map[string]any); m["key"] == "kubernetes.io/metadata.name" {
				got = m["values"].([]any)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: NotIn %v, want %v", set, got, want)
		}
	}
}

// TestCredentialsRequired: without an existing Secret, each of the keys the
// pods cannot start without is required at install, by name.
func TestCredentialsRequired(t *testing.T) {
	base := []string{"ci/cert-manager-values.yaml"}
	for _, key := range []string{"accessKey", "secretKey", "projectID"} {
		if out, err := renderRaw(t, base, "scaleway."+key+"="); err == nil || !strings.Contains(out, "scaleway."+key+" is empty") {
			t.Errorf("scaleway.%s empty rendered (err %v):\n%.300s", key, err, out)
		}
	}
	if _, err := renderRaw(t, base); err != nil {
		t.Errorf("the credentials given: %v", err)
	}
}

// TestKeyMountedForRotation: the pods read the API key from the
// credentials Secret mounted where --scaleway-key-dir points, so that a new
// key there is used without a restart; the pods roll only when what a
// running pod cannot change does (the Project, the region), not the key.
func TestKeyMountedForRotation(t *testing.T) {
	base := []string{"ci/cert-manager-values.yaml"}
	objs := render(t, base)
	var dir string
	for _, a := range containerArgs(t, objs) {
		if v, ok := strings.CutPrefix(a, "--scaleway-key-dir="); ok {
			dir = v
		}
	}
	mounted := ""
	for _, m := range container(t, objs)["volumeMounts"].([]any) {
		if m := m.(map[string]any); m["mountPath"] == dir && m["readOnly"] == true {
			mounted = m["name"].(string)
		}
	}
	if dir == "" || mounted == "" {
		t.Fatalf("--scaleway-key-dir=%q is no read-only mount: %v", dir, container(t, objs)["volumeMounts"])
	}
	// status and handover, run in the pod with kubectl exec, look there
	// by default.
	if dir != app.DefaultKeyDir {
		t.Errorf("the chart mounts the key at %s, the commands' default is %s", dir, app.DefaultKeyDir)
	}
	secretName := one(t, objs, "Secret").GetName()
	for _, v := range podSpec(t, objs)["volumes"].([]any) {
		v := v.(map[string]any)
		if v["name"] != mounted {
			continue
		}
		sec, _ := v["secret"].(map[string]any)
		if sec == nil || sec["secretName"] != secretName || fmt.Sprint(sec["items"]) != "[map[key:SCW_ACCESS_KEY path:SCW_ACCESS_KEY] map[key:SCW_SECRET_KEY path:SCW_SECRET_KEY]]" {
			t.Errorf("volume %s: %v, want the keys of Secret %s as files", mounted, v, secretName)
		}
	}
	checksum := func(set ...string) any {
		return field(t, one(t, render(t, base, set...), "Deployment"), "spec", "template", "metadata", "annotations").(map[string]any)["checksum/scaleway"]
	}
	before := checksum()
	if after := checksum("scaleway.secretKey=0b0b0b0b-0000-4000-8000-000000000002", "scaleway.accessKey=SCWNEWKEY00000000000"); after != before {
		t.Errorf("a new key rolls the pods (checksum %v → %v)", before, after)
	}
	if after := checksum("scaleway.projectID=7c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"); after == before {
		t.Error("a new Project does not roll the pods")
	}
}

// TestNetworkPolicy: off by default; on, it selects the Deployment's pods,
// opens the webhook's port to every address outside the Pod network (or
// the peers given), the metrics port to the peers given only, and lets
// out DNS and the TCP ports of the apiserver and the Scaleway API only.
func TestNetworkPolicy(t *testing.T) {
	base := []string{"ci/cert-manager-values.yaml"}
	if n := len(find(render(t, base), "NetworkPolicy")); n != 0 {
		t.Fatalf("%d NetworkPolicies rendered by default", n)
	}
	objs := render(t, base, "networkPolicy.enabled=true")
	np := one(t, objs, "NetworkPolicy")
	selector := field(t, one(t, objs, "Deployment"), "spec", "selector", "matchLabels")
	if got := field(t, np, "spec", "podSelector", "matchLabels"); fmt.Sprint(got) != fmt.Sprint(selector) {
		t.Errorf("podSelector %v, the Deployment's %v", got, selector)
	}
	ingress := field(t, np, "spec", "ingress").([]any)
	if len(ingress) != 2 || fmt.Sprint(ingress[0]) != "map[from:[map[ipBlock:map[cidr:0.0.0.0/0 except:[100.64.0.0/15]]]] ports:[map[port:9443 protocol:TCP]]]" ||
		fmt.Sprint(ingress[1]) != "map[ports:[map[port:8081 protocol:TCP]]]" {
		t.Errorf("ingress %v: want the webhook's port from outside Kapsule's Pod network only, and the probes' port", ingress)
	}
	if egress := fmt.Sprint(field(t, np, "spec", "egress")); egress != "[map[ports:[map[port:53 protocol:UDP] map[port:53 protocol:TCP]]] map[ports:[map[port:443 protocol:TCP] map[port:6443 protocol:TCP]]]]" {
		t.Errorf("egress %s", egress)
	}
	own := one(t, render(t, []string{overrides.values}), "NetworkPolicy")
	ingress = field(t, own, "spec", "ingress").([]any)
	if len(ingress) != 3 || !strings.Contains(fmt.Sprint(ingress[0]), "10.1.0.0/16") || strings.Contains(fmt.Sprint(ingress[0]), "except") ||
		!strings.Contains(fmt.Sprint(ingress[2]), "port:8444") || !strings.Contains(fmt.Sprint(ingress[2]), "monitoring") {
		t.Errorf("the overrides' ingress %v: want webhookFrom on the webhook's port, metricsFrom on the metrics port", ingress)
	}
}
