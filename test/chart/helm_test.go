package chart

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

var (
	root      = mustAbs("../..")
	chartDir  = filepath.Join(root, "charts", "scw-lb-ipam")
	helmBin   = filepath.Join(root, "bin", "helm")
	release   = "scw-lb-ipam"
	namespace = "scw-lb-ipam"
)

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// helm runs the helm CLI with a private home, so nothing of the machine's
// helm configuration leaks in.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := testenv.HelmCommand(context.Background(), helmBin, t.TempDir(), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// render runs helm template with values files (relative to the chart) and
// extra --set flags, and decodes the objects.
func render(t testing.TB, valuesFiles []string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := renderRaw(t, valuesFiles, sets...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return decode(t, out)
}

func renderRaw(t testing.TB, valuesFiles []string, sets ...string) (string, error) {
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for _, f := range valuesFiles {
		if !filepath.IsAbs(f) {
			f = filepath.Join(chartDir, f)
		}
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return helm(t, args...)
}

func decode(t testing.TB, manifests string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err == io.EOF {
				return objs
			}
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// find returns the rendered objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// installed leaves out helm's hooks (helm test's Pod, ServiceAccount and
// RBAC): what helm install creates and the pods run with.
func installed(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAnnotations()["helm.sh/hook"] == "" {
			out = append(out, o)
		}
	}
	return out
}

func one(t testing.TB, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := find(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%d %s rendered, want 1", len(found), kind)
	}
	return found[0]
}

func field(t testing.TB, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no field %s", o.GetKind(), o.GetName(), strings.Join(path, "."))
	}
	return v
}

func webhookOf(t testing.TB, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	hooks := field(t, one(t, objs, "MutatingWebhookConfiguration"), "webhooks").([]any)
	if len(hooks) != 1 {
		t.Fatalf("%d webhooks", len(hooks))
	}
	return hooks[0].(map[string]any)
}

func containerArgs(t testing.TB, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var args []string
	for _, a := range container(t, objs)["args"].([]any) {
		args = append(args, fmt.Sprint(a))
	}
	return args
}

// podSpec is the Deployment's pod template spec; container its only
// container.
func podSpec(t testing.TB, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	return field(t, one(t, objs, "Deployment"), "spec", "template", "spec").(map[string]any)
}

func container(t testing.TB, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	containers := podSpec(t, objs)["containers"].([]any)
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	return containers[0].(map[string]any)
}

// named returns the rendered object of a kind and name.
func named(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range find(objs, kind) {
		if o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// containerPort returns the container's port of that name, 0 if none.
func containerPort(t testing.TB, objs []*unstructured.Unstructured, name string) int64 {
	t.Helper()
	for _, p := range container(t, objs)["ports"].([]any) {
		if p := p.(map[string]any); p["name"] == name {
			return toInt(p["containerPort"])
		}
	}
	return 0
}

// servicePort returns the port of that name of the rendered Service.
func servicePort(t testing.TB, objs []*unstructured.Unstructured, name string) int64 {
	t.Helper()
	for _, p := range field(t, one(t, objs, "Service"), "spec", "ports").([]any) {
		if p := p.(map[string]any); p["name"] == name {
			return toInt(p["port"])
		}
	}
	return 0
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return -1
}

// TestPackage runs the release workflow's helm package: the archive carries
// the chart's version, and its version and appVersion agree (the release's
// one version, which the image push also checks).
func TestPackage(t *testing.T) {
	dst := t.TempDir()
	if out, err := helm(t, "package", chartDir, "--destination", dst); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	v := appVersion()
	if _, err := os.Stat(filepath.Join(dst, "scw-lb-ipam-"+v+".tgz")); err != nil {
		t.Fatalf("no scw-lb-ipam-%s.tgz: %v", v, err)
	}
	out, err := helm(t, "show", "chart", filepath.Join(dst, "scw-lb-ipam-"+v+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\nversion: "+v+"\n") {
		t.Fatalf("packaged chart's version differs from appVersion %s:\n%s", v, out)
	}
}
