package chart

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// TestPreflightTestHook: helm test's Pod runs preflight with exactly the
// Deployment's credentials, environment, pool file, image and security
// context, and is not one of the webhook's endpoints; it runs as a
// ServiceAccount of its own (see checkPreflightRBAC).
func TestPreflightTestHook(t *testing.T) {
	for _, tt := range []struct {
		values   string
		fullname string
	}{
		{"ci/self-managed-values.yaml", release},
		{"ci/cert-manager-values.yaml", release},
		{"ci/overrides-values.yaml", "edge-ipam"},
	} {
		t.Run(tt.values, func(t *testing.T) {
			objs := render(t, []string{tt.values})
			pod := named(t, objs, "Pod", tt.fullname+"-preflight")
			// Removed once the test ends, passed or failed (helm test
			// --logs prints its lines first): nothing outlives helm
			// uninstall.
			if a := pod.GetAnnotations(); a["helm.sh/hook"] != "test" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded,hook-failed" {
				t.Errorf("Pod annotations %v", a)
			}
			spec := field(t, pod, "spec").(map[string]any)
			dep := podSpec(t, objs)
			if spec["serviceAccountName"] != tt.fullname+"-preflight" || spec["restartPolicy"] != "Never" || !reflect.DeepEqual(spec["securityContext"], dep["securityContext"]) {
				t.Errorf("pod spec: service account %v (want the test's own, not the Deployment's %v), restartPolicy %v, securityContext %v", spec["serviceAccountName"], dep["serviceAccountName"], spec["restartPolicy"], spec["securityContext"])
			}
			if !reflect.DeepEqual(spec["volumes"].([]any)[0], dep["volumes"].([]any)[0]) {
				t.Errorf("pool-file volume %v, the Deployment's %v", spec["volumes"], dep["volumes"])
			}
			c := spec["containers"].([]any)[0].(map[string]any)
			web := container(t, objs)
			for _, k := range []string{"env", "envFrom", "image", "imagePullPolicy", "securityContext"} {
				if !reflect.DeepEqual(c[k], web[k]) {
					t.Errorf("%s: %v, the Deployment's %v", k, c[k], web[k])
				}
			}
			if !reflect.DeepEqual(c["volumeMounts"].([]any)[0], web["volumeMounts"].([]any)[0]) {
				t.Errorf("pool-file mount %v, the Deployment's %v", c["volumeMounts"], web["volumeMounts"])
			}
			var args []string
			for _, a := range c["args"].([]any) {
				args = append(args, fmt.Sprint(a))
			}
			want := []string{"preflight", "--config=/etc/scw-lb-ipam/pools.yaml", "--webhook-configuration=" + tt.fullname, "--excluded-namespaces="}
			if !slices.Equal(args, want) {
				t.Errorf("args %v, want %v", args, want)
			}
			if !slices.Contains(containerArgs(t, objs), "--config=/etc/scw-lb-ipam/pools.yaml") {
				t.Errorf("the Deployment reads another pool file: %v", containerArgs(t, objs))
			}
			// Not an endpoint of the webhook Service, not counted by the PDB.
			selector := field(t, one(t, objs, "Service"), "spec", "selector").(map[string]any)
			labels := map[string]any{}
			for k, v := range pod.GetLabels() {
				labels[k] = v
			}
			if subset(selector, labels) {
				t.Errorf("the test Pod's labels %v match the webhook Service's selector %v", labels, selector)
			}

			checkPreflightRBAC(t, objs, tt.fullname, "")
		})
	}
	objs := render(t, []string{"ci/self-managed-values.yaml"}, "tests.preflight.write=true", "tests.preflight.namespace=payments")
	checkPreflightRBAC(t, objs, release, "payments")
	c := field(t, named(t, objs, "Pod", release+"-preflight"), "spec", "containers").([]any)[0].(map[string]any)
	if args := fmt.Sprint(c["args"]); !strings.Contains(args, "--namespace=payments --write") {
		t.Errorf("tests.preflight values: args %s", args)
	}
	checkPreflightRBAC(t, render(t, []string{"ci/self-managed-values.yaml"}, "serviceAccount.create=false", "serviceAccount.name=existing"), release, "")
	if out, err := renderRaw(t, []string{"ci/self-managed-values.yaml"}, "tests.preflight.namespace=Not_A_Namespace"); err == nil {
		t.Errorf("the schema let an invalid namespace name through:\n%.300s", out)
	}
}

// checkPreflightRBAC: helm test's ServiceAccount, its RBAC and the Pod are
// test hooks, created in that order (weights -2, -1, 0); the RBAC binds the
// test's own ServiceAccount only, so that the webhook's pods gain nothing
// while a test runs or after a failed one (test hooks outlive it, and helm
// uninstall). It grants what preflight needs and nothing else: namespaces
// read, this release's webhook configuration, and a Service create, in
// dryRunNS (tests.preflight.namespace, when set) only, else cluster-wide.
func checkPreflightRBAC(t *testing.T, objs []*unstructured.Unstructured, fullname, dryRunNS string) {
	t.Helper()
	name := fullname + "-preflight"
	const policy = "before-hook-creation,hook-succeeded"
	hook := func(o *unstructured.Unstructured, weight string) {
		if a := o.GetAnnotations(); a["helm.sh/hook"] != "test" || a["helm.sh/hook-weight"] != weight || a["helm.sh/hook-delete-policy"] != policy {
			t.Errorf("%s %s annotations %v: want a test hook of weight %s", o.GetKind(), o.GetName(), a, weight)
		}
	}
	hook(named(t, objs, "ServiceAccount", name), "-2")
	if a := named(t, objs, "Pod", name).GetAnnotations(); a["helm.sh/hook-weight"] != "" || a["helm.sh/hook-delete-policy"] != policy+",hook-failed" {
		t.Errorf("Pod annotations %v: want a test hook of weight 0", a)
	}
	deploymentSA := podSpec(t, objs)["serviceAccountName"]
	if deploymentSA == name {
		t.Fatalf("the Deployment runs as the test's ServiceAccount %s", name)
	}
	// Every binding, hook or not: the Deployment's ServiceAccount is bound
	// by the installed RBAC only.
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range find(objs, kind) {
			isHook := b.GetAnnotations()["helm.sh/hook"] != ""
			for _, s := range field(t, b, "subjects").([]any) {
				s := s.(map[string]any)
				if isHook && (s["name"] == deploymentSA || s["name"] != name) {
					t.Errorf("test hook %s %s binds %v, want only ServiceAccount %s (the Deployment's is %v)", kind, b.GetName(), s, name, deploymentSA)
				}
				if !isHook && s["name"] == name {
					t.Errorf("installed %s %s binds the test's ServiceAccount %v", kind, b.GetName(), s)
				}
			}
		}
	}
	rules := func(kind, ns string) any {
		o := named(t, objs, kind, name)
		hook(o, "-1")
		if o.GetNamespace() != ns {
			t.Errorf("%s %s in namespace %q, want %q", kind, name, o.GetNamespace(), ns)
		}
		binding := named(t, objs, kind+"Binding", name)
		hook(binding, "-1")
		if binding.GetNamespace() != ns || field(t, binding, "roleRef", "name") != name || field(t, binding, "roleRef", "kind") != kind {
			t.Errorf("%sBinding %s/%s binds %v", kind, binding.GetNamespace(), name, binding.Object["roleRef"])
		}
		want := []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": namespace}}
		if subjects := field(t, binding, "subjects"); !reflect.DeepEqual(subjects, want) {
			t.Errorf("%sBinding %s subjects %v, want %v", kind, name, subjects, want)
		}
		return field(t, o, "rules")
	}
	createServices := map[string]any{"apiGroups": []any{""}, "resources": []any{"services"}, "verbs": []any{"create"}}
	wantCluster := []any{
		map[string]any{"apiGroups": []any{""}, "resources": []any{"namespaces"}, "verbs": []any{"get", "list"}},
		map[string]any{"apiGroups": []any{"admissionregistration.k8s.io"}, "resources": []any{"mutatingwebhookconfigurations"}, "resourceNames": []any{fullname}, "verbs": []any{"get"}},
	}
	roles := find(objs, "Role")
	if dryRunNS == "" {
		wantCluster = append(wantCluster, createServices)
	} else {
		if got := rules("Role", dryRunNS); !reflect.DeepEqual(got, []any{createServices}) {
			t.Errorf("test Role rules %v, want %v", got, []any{createServices})
		}
	}
	for _, r := range roles {
		if r.GetName() == name && dryRunNS == "" {
			t.Errorf("a test Role %s/%s without tests.preflight.namespace", r.GetNamespace(), name)
		}
	}
	if got := rules("ClusterRole", ""); !reflect.DeepEqual(got, wantCluster) {
		t.Errorf("test ClusterRole rules %v, want %v", got, wantCluster)
	}
}

// TestHelmTestPreflight installs the chart for real and runs helm test. No
// kubelet runs here: the webhook is the image's binary as a process (as in
// TestSelfManagedEndToEnd), and so is the test Pod, started with the Pod's
// own arguments and environment (the Secret's values resolved, the pool
// file's ConfigMap written where the Pod mounts it) as its ServiceAccount,
// its phase then written as a kubelet would. helm test passes against the
// working install (with --write: one canary booked and released) and fails,
// with preflight's reason in the Pod's output, once the webhook is stopped.
func TestHelmTestPreflight(t *testing.T) {
	const secretKey = emulatorSecretKey
	emu, values := chartValues(t, "172.16.35.10-172.16.35.20", func(emu *emulator.Server) string {
		return fmt.Sprintf(`scaleway:
  accessKey: SCWABCDEFGHIJKLMNOPQ
  secretKey: %s
  projectID: %s
  apiURL: %s
tests:
  preflight:
    write: true
    namespace: payments
`, secretKey, emulator.DefaultProjectID, emu.URL())
	})
	admin := adminKubeconfig(t)
	if out, err := helm(t, "install", release, chartDir, "--namespace", namespace, "--values", values, "--kubeconfig", admin); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = helm(t, "uninstall", release, "--namespace", namespace, "--kubeconfig", admin, "--wait")
		_ = kube.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: release + "-tls"}})
	})

	objs := render(t, []string{values})
	webhook := startBinary(t, containerArgs(t, objs), poolFile(t, objs), serviceAccountKubeconfig(t), emu.URL())
	routeWebhook(t, webhook)

	// While helm test runs, its RBAC lets the test's own ServiceAccount
	// create Services in tests.preflight.namespace only, and gives the
	// webhook's ServiceAccount nothing.
	webhookSA := "system:serviceaccount:" + namespace + ":" + podSpec(t, objs)["serviceAccountName"].(string)
	testSA := "system:serviceaccount:" + namespace + ":" + release + "-preflight"
	during := func() {
		mayCreate(t, testSA, "payments", true)
		mayCreate(t, testSA, "default", false)
		mayCreate(t, webhookSA, "payments", false)
		mayCreate(t, webhookSA, "default", false)
	}

	emu.ResetCounts()
	out, logs, err := helmTest(t, admin, during)
	if err != nil {
		t.Fatalf("helm test against a working install: %v\n%s\npreflight:\n%s\nwebhook:\n%s", err, out, logs, webhook.logs.String())
	}
	t.Logf("helm test of the working install:\n%s\npreflight:\n%s", out, logs)
	for _, want := range []string{"ok  credentials: ", "ok  pool dc-link network: ", "ok  pool dc-link canary: booked 172.16.35.", "ok  webhook configuration: scw-lb-ipam: 1 webhook(s)",
		"ok  opted-in namespace: payments, which may use pool dc-link", `ok  webhook dry run: the webhook answered scw-lb-ipam-preflight-`, "scw-lb-ipam: dry run: would reserve 172.16.35."} {
		if !strings.Contains(logs, want) {
			t.Errorf("preflight's output lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "FAIL") || strings.Contains(logs, secretKey) {
		t.Errorf("preflight's output:\n%s", logs)
	}
	if book, release := emu.Count(emulator.OpBookIP), emu.Count(emulator.OpReleaseIP); book != 1 || release != 1 {
		t.Errorf("helm test booked %d and released %d addresses; want the one canary, booked and released (the dry run books nothing)", book, release)
	}

	webhook.stop(t)
	out, logs, err = helmTest(t, admin, nil)
	if err == nil {
		t.Fatalf("helm test passed with the webhook stopped:\n%s\npreflight:\n%s", out, logs)
	}
	t.Logf("helm test with the webhook stopped:\n%s\npreflight:\n%s", out, logs)
	for _, want := range []string{"ok  credentials: ", "FAIL webhook dry run: a dry-run create of LoadBalancer Service payments/scw-lb-ipam-preflight-", "the apiserver could not call the webhook", "preflight: 1 of "} {
		if !strings.Contains(logs, want) {
			t.Errorf("preflight's output lacks %q:\n%s", want, logs)
		}
	}
	if !strings.Contains(out, release+"-preflight") {
		t.Errorf("helm test's output does not name the failed Pod:\n%s", out)
	}

	// After the failed test: helm deleted the test's ServiceAccount and
	// RBAC (hooks that succeeded) and left the Pod; neither account may
	// create Services.
	mayCreate(t, webhookSA, "payments", false)
	mayCreate(t, testSA, "payments", false)
}

// mayCreate checks whether ServiceAccount user may create Services in ns.
func mayCreate(t *testing.T, user, ns string, want bool) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "services"},
	}}
	if err := kube.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	if sar.Status.Allowed != want {
		t.Errorf("%s may create services in %s: %v, want %v (%s)", user, ns, sar.Status.Allowed, want, sar.Status.Reason)
	}
}

// helmTest runs helm test on the release and stands in for the kubelet of
// the Pod it creates, calling during (if set) once the Pod exists; it
// returns helm's output and the Pod's.
func helmTest(t *testing.T, kubeconfig string, during func()) (out, logs string, err error) {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: namespace, Name: release + "-preflight"}
	// A failed run leaves its Pod (hook-succeeded only deletes): helm
	// deletes it before creating the next one.
	var previous types.UID
	if old := (&corev1.Pod{}); kube.Get(ctx, key, old) == nil {
		previous = old.UID
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := helm(t, "test", release, "--namespace", namespace, "--kubeconfig", kubeconfig, "--timeout", "3m")
		done <- result{out, err}
	}()
	pod := &corev1.Pod{}
	created := localrun.Poll(2*time.Minute, 100*time.Millisecond, func() bool {
		err := kube.Get(ctx, key, pod)
		if err == nil && pod.UID != previous && pod.DeletionTimestamp == nil {
			return true
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("helm test ended before its Pod ran: %v\n%s", r.err, r.out)
		default:
		}
		return false
	})
	if !created {
		t.Fatal("helm test created no Pod in 2 minutes")
	}
	if during != nil {
		during()
	}
	logs, exitCode := runPod(t, pod)
	r := <-done
	if exitCode != 0 && r.err == nil {
		t.Errorf("the Pod exited %d, yet helm test passed", exitCode)
	}
	return r.out, logs, r.err
}

// runPod runs the Pod's only container as a kubelet would, with what a pod
// gets from its volumes, environment and ServiceAccount, then writes the
// Pod's phase from the exit code. It returns the container's output.
func runPod(t *testing.T, pod *corev1.Pod) (string, int) {
	t.Helper()
	ctx := context.Background()
	c := pod.Spec.Containers[0]
	if c.Image == "" || c.Args[0] != "preflight" {
		t.Fatalf("the test Pod runs %q %v", c.Image, c.Args)
	}
	// Volumes: each ConfigMap written to a directory standing for its mount.
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap == nil {
			t.Fatalf("volume %s is not a ConfigMap: the stand-in kubelet knows ConfigMaps only", v.Name)
		}
		cm := &corev1.ConfigMap{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.ConfigMap.Name}, cm); err != nil {
			t.Fatalf("the Pod's ConfigMap %s: %v", v.ConfigMap.Name, err)
		}
		dir := t.TempDir()
		for k, data := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		dirs[v.Name] = dir
	}
	args := slices.Clone(c.Args)
	for _, m := range c.VolumeMounts {
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], m.MountPath, dirs[m.Name])
		}
	}
	// In-cluster credentials of its ServiceAccount: a kubeconfig that
	// impersonates it, so the chart's RBAC (and the test's) applies.
	sa := "system:serviceaccount:" + pod.Namespace + ":" + pod.Spec.ServiceAccountName
	args = append(args, "--kubeconfig="+kubeconfig(t, sa, "system:serviceaccounts", "system:serviceaccounts:"+pod.Namespace, "system:authenticated"))

	// The environment: only the Pod's (HOME empty, so that no scw CLI
	// profile of this machine is read).
	env := []string{"HOME=" + t.TempDir()}
	secret := func(name string) *corev1.Secret {
		s := &corev1.Secret{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, s); err != nil {
			t.Fatalf("the Pod's Secret %s: %v", name, err)
		}
		return s
	}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil {
			t.Fatalf("envFrom %v: the stand-in kubelet knows Secrets only", from)
		}
		for k, v := range secret(from.SecretRef.Name).Data {
			env = append(env, from.Prefix+k+"="+string(v))
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+pod.Namespace)
		case e.ValueFrom.SecretKeyRef != nil:
			env = append(env, e.Name+"="+string(secret(e.ValueFrom.SecretKeyRef.Name).Data[e.ValueFrom.SecretKeyRef.Key]))
		default:
			t.Fatalf("env %s: the stand-in kubelet does not know %v", e.Name, e.ValueFrom)
		}
	}

	run, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(run, binary, args...)
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	exitCode := 0
	if err := cmd.Run(); err != nil {
		exitErr, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running the test Pod's command: %v", err)
		}
		exitCode = exitErr.ExitCode()
	}

	phase, reason := corev1.PodSucceeded, "Completed"
	if exitCode != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase:     phase,
		StartTime: &now,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(exitCode), Reason: reason, StartedAt: now, FinishedAt: now}},
		}},
	}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatalf("writing the test Pod's phase: %v", err)
	}
	return logs.String(), exitCode
}
