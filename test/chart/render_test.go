package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

func TestLint(t *testing.T) {
	for _, m := range modes {
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
			if len(conds) != 1 || !strings.Contains(conds[0].(map[string]any)["expression"].(string), `object.spec.type == "LoadBalancer"`) {
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
		for _, r := range field(t, one(t, objs, kind), "rules").([]any) {
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
