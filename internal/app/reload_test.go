package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/scaleway/scaleway-sdk-go/scw"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

func TestConfigReload(t *testing.T) {
	_, pns, cloud, file := reloadWorld(t, scaleway.Options{})
	dc, nodes := pns["dc"], pns["nodes"]
	dir := t.TempDir()
	path := filepath.Join(dir, "pools.yaml")
	// A ConfigMap volume: the file is a symlink into a data directory that
	// is swapped as a whole.
	write := func(content string) {
		data := filepath.Join(dir, "data-"+time.Now().Format("150405.000000000"))
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "pools.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "tmp-link")
		if err := os.Symlink(filepath.Join(data, "pools.yaml"), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(file("  - {name: a, privateNetworkID: " + dc.ID + "}\n"))
	cfg, _ := resolvedConfig(t, path, cloud)
	alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: cloud, Config: cfg, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
	var logged []string
	r := &configReloader{path: path, cloud: cloud, alloc: alloc, policy: ipam.Retention{PendingGrace: time.Minute, Margin: 20 * time.Second}, clock: clock.RealClock{}, log: funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})}
	r.last, _ = os.ReadFile(path)

	write(file("  - {name: a, privateNetworkID: " + dc.ID + "}\n  - {name: b, privateNetworkID: " + nodes.ID + ", default: true}\n"))
	r.check(context.Background())
	if _, ok := alloc.Config().Pool("b"); !ok {
		t.Fatalf("good change not applied; log: %v", logged)
	}
	// Listed at once: admissions do not list by themselves until the next
	// background listing.
	for _, st := range alloc.Inventory().Stats() {
		if !st.Known {
			t.Fatalf("pool %s not listed after the reload", st.Pool)
		}
	}

	// A file that parses but names a subnet the network does not have.
	write(file("  - {name: c, privateNetworkID: " + dc.ID + ", subnet: 10.9.0.0/24}\n"))
	r.check(context.Background())
	if _, ok := alloc.Config().Pool("b"); !ok {
		t.Fatal("a bad file replaced the good configuration")
	}
	if len(logged) == 0 || !strings.Contains(logged[len(logged)-1], "10.9.0.0/24 is not a subnet") {
		t.Fatalf("the refusal does not say why: %v", logged)
	}
	n := len(logged)
	r.check(context.Background())
	if len(logged) != n {
		t.Fatal("the same bad file was reported again")
	}

	write("pools: [")
	r.check(context.Background())
	if _, ok := alloc.Config().Pool("b"); !ok || len(logged) != n+1 {
		t.Fatalf("unparsable file: pools kept=%v, log %v", ok, logged)
	}
}

// TestConfigReloadRetriesTransientErrors: a reload that meets a Scaleway
// outage is tried again with backoff, not dropped for good (replicas would
// diverge), and each load shows in the generation gauge.
func TestConfigReloadRetriesTransientErrors(t *testing.T) {
	srv, pns, cloud, text := reloadWorld(t, scaleway.Options{Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}})
	dc, nodes := pns["dc"], pns["nodes"]
	file := func(pools string) []byte { return []byte(text(pools)) }
	path := filepath.Join(t.TempDir(), "pools.yaml")
	first := file("  - {name: a, privateNetworkID: " + dc.ID + "}\n")
	cfg, err := ipam.ParseConfig(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := inventory.Resolve(context.Background(), cloud, cfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Now())
	r := &configReloader{path: path, every: 10 * time.Second, cloud: cloud, alloc: fixtures.Must(allocator.New(allocator.Options{Cloud: cloud, Config: cfg, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}})),
		policy: ipam.Retention{PendingGrace: time.Minute, Margin: 20 * time.Second}, gauge: newConfigGauge(reg), clock: clk, log: logr.Discard(), last: first}
	r.gauge.loaded(first)

	second := file("  - {name: a, privateNetworkID: " + dc.ID + "}\n  - {name: b, privateNetworkID: " + nodes.ID + "}\n")
	if err := os.WriteFile(path, second, 0o600); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(emulator.OpGetPrivateNetwork, 1, emulator.Fault{Status: 503})
	r.check(context.Background())
	if _, ok := r.alloc.Config().Pool("b"); ok {
		t.Fatal("applied although Scaleway failed")
	}
	calls := srv.Count(emulator.OpGetPrivateNetwork)
	r.check(context.Background()) // before the backoff: not tried
	if n := srv.Count(emulator.OpGetPrivateNetwork) - calls; n != 0 {
		t.Fatalf("%d GetPrivateNetwork calls before the backoff ran out, want 0", n)
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	r.check(context.Background())
	if _, ok := r.alloc.Config().Pool("b"); !ok {
		t.Fatal("the reload was dropped after a transient error")
	}
	if got := testutil.ToFloat64(r.gauge.vec.WithLabelValues(fileHash(second))); got != 2 {
		t.Fatalf("scw_lb_ipam_config_generation{sha256=%s} = %v, want 2", fileHash(second), got)
	}

	// A retention shorter than the margin is refused, naming the margin.
	short := file("  - {name: a, privateNetworkID: " + dc.ID + ", retention: 5s}\n")
	if err := os.WriteFile(path, short, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged []string
	r.log = funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	r.check(context.Background())
	if p, _ := r.alloc.Config().Pool("a"); p.Retention.Duration != ipam.DefaultRetention || len(logged) != 1 ||
		!strings.Contains(logged[0], "pools[0] (a).retention: 5s is not longer than the reuse safety margin 20s") {
		t.Fatalf("short retention: %v", logged)
	}
}

func TestParseServeFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "scw-lb-ipam")
	o, err := ParseFlags([]string{"--config", "/p.yaml", "--excluded-namespaces", "kube-system, infra"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Webhook.Excluded, ",") != "kube-system,infra,scw-lb-ipam" || o.Leader.Namespace != "scw-lb-ipam" || o.ConfigFile != "/p.yaml" || !o.SelfManagedTLS || o.Certs.Namespace != "scw-lb-ipam" {
		t.Fatalf("options %+v", o)
	}
	for _, bad := range [][]string{{"--webhook-port", "0"}, {"--occupancy-ttl", "1ms"}, {"--index-refresh-interval", "5m"}, {"--index-refresh-interval", "0s"}, {"extra"}, {"--nope"}, {"--tls-mode", "magic"}, {"--sweep-interval", "0s"}, {"--webhook-timeout", "10s", "--pending-grace", "15s"}, {"--webhook-timeout", "10s", "--pending-grace", "20s"}, {"--webhook-timeout", "40s"}} {
		if _, err := ParseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	t.Setenv("POD_NAMESPACE", "")
	if _, err := ParseFlags(nil); err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE") {
		t.Errorf("self-managed TLS without POD_NAMESPACE: %v", err)
	}
	if o, err := ParseFlags([]string{"--tls-mode", "cert-manager"}); err != nil || o.SelfManagedTLS {
		t.Errorf("cert-manager mode: %v %+v %v", o.SelfManagedTLS, o.Certs, err)
	}
}

// reloadWorld is an emulator with the networks "nodes" and "dc", a Cloud
// talking to it (opts with the emulator's URL and credentials added), and
// the text of a pool file for the given pools lines.
func reloadWorld(t *testing.T, opts scaleway.Options) (*emulator.Server, map[string]emulator.PrivateNetwork, scaleway.Cloud, func(pools string) string) {
	t.Helper()
	srv := emulator.NewTestServer(t, emulator.Options{SecretKey: "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"})
	pns, err := srv.AddPrivateNetworks("nodes=172.16.0.0/22", "dc=172.16.32.0/22")
	if err != nil {
		t.Fatal(err)
	}
	opts.Region = "fr-par"
	opts.ClientOptions = []scw.ClientOption{
		scw.WithAPIURL(srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"),
		scw.WithDefaultProjectID(emulator.DefaultProjectID),
	}
	cloud, err := scaleway.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	file := func(pools string) string {
		return "clusterName: test\nregion: fr-par\nclusterPrivateNetworkID: " + pns["nodes"].ID + "\npools:\n" + pools
	}
	return srv, pns, cloud, file
}

// The pool file changes between Serve's read and the reloader's first
// poll (a ConfigMap updated while the pod starts): the reloader starts from
// what Serve loaded, so the change is applied, not taken for the file in
// use.
func TestConfigReloadStartsFromWhatServeLoaded(t *testing.T) {
	_, pns, cloud, text := reloadWorld(t, scaleway.Options{})
	dc, nodes := pns["dc"], pns["nodes"]
	path := filepath.Join(t.TempDir(), "pools.yaml")
	first := []byte(text("  - {name: a, privateNetworkID: " + dc.ID + "}\n"))
	if err := os.WriteFile(path, first, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded := resolvedConfig(t, path, cloud)
	second := []byte(text("  - {name: a, privateNetworkID: " + dc.ID + "}\n  - {name: b, privateNetworkID: " + nodes.ID + "}\n"))
	if err := os.WriteFile(path, second, 0o600); err != nil {
		t.Fatal(err)
	}

	clk := clocktesting.NewFakeClock(time.Now())
	alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: cloud, Config: cfg, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
	r := newConfigReloader(reloadOptions{path: path, every: 10 * time.Second, loaded: loaded, cloud: cloud, alloc: alloc,
		policy: ipam.Retention{PendingGrace: time.Minute, Margin: 20 * time.Second}, log: logr.Discard()}, newConfigGauge(prometheus.NewRegistry()), clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Start(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	if !localrun.Poll(time.Until(deadline), time.Millisecond, clk.HasWaiters) {
		t.Fatal("the reloader never started polling")
	}
	clk.Step(10 * time.Second)
	applied := func() bool { _, ok := alloc.Config().Pool("b"); return ok }
	if !localrun.Poll(time.Until(deadline), 10*time.Millisecond, applied) {
		t.Fatal("the change made before the first poll was never applied")
	}
}

// TestPoolInAnotherProjectRefused: IPAM books on a Private Network only in
// that network's Project, so a pool on a network of another Project than
// the credentials' would fail every admission. The pool file is refused at
// start and on reload, the message naming both Projects; the reload keeps
// the last good configuration.
func TestPoolInAnotherProjectRefused(t *testing.T) {
	const otherProject = "2b7f4d1e-9c3a-4e5f-8a6b-7c8d9e0f1a2b"
	srv, pns, cloud, text := reloadWorld(t, scaleway.Options{})
	other, err := srv.AddPrivateNetworkInProject(otherProject, "elsewhere", "172.16.40.0/22")
	if err != nil {
		t.Fatal(err)
	}
	want := "pools[1] (b).privateNetworkID: Private Network " + other.ID + " (elsewhere) is in Project " + otherProject +
		", not in the credentials' Project " + emulator.DefaultProjectID + " (SCW_DEFAULT_PROJECT_ID)"
	good := text("  - {name: a, privateNetworkID: " + pns["dc"].ID + "}\n")
	bad := text("  - {name: a, privateNetworkID: " + pns["dc"].ID + "}\n  - {name: b, privateNetworkID: " + other.ID + "}\n")
	path := filepath.Join(t.TempDir(), "pools.yaml")

	t.Run("start", func(t *testing.T) {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := ParseFlags([]string{"--tls-mode=cert-manager", "--config=" + path})
		if err != nil {
			t.Fatal(err)
		}
		o.Log, o.Metrics = logr.Discard(), prometheus.NewRegistry()
		o.ScalewayOptions = []scw.ClientOption{scw.WithAPIURL(srv.URL()),
			scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"), scw.WithDefaultProjectID(emulator.DefaultProjectID)}
		// Serve resolves the pool file before it needs a cluster: the
		// refusal comes without one.
		err = Serve(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Serve: %v\nwant it to say %q", err, want)
		}
	})

	t.Run("reload", func(t *testing.T) {
		if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, loaded := resolvedConfig(t, path, cloud)
		alloc := fixtures.Must(allocator.New(allocator.Options{Cloud: cloud, Config: cfg, References: allocator.NoReferences{}, Claims: allocator.NoClaims{}}))
		var logged []string
		r := &configReloader{path: path, cloud: cloud, alloc: alloc, last: loaded, policy: ipam.Retention{PendingGrace: time.Minute, Margin: 20 * time.Second},
			clock: clock.RealClock{}, log: funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})}
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		r.check(context.Background())
		if _, ok := alloc.Config().Pool("b"); ok {
			t.Fatal("a pool in another Project was loaded")
		}
		if _, ok := alloc.Config().Pool("a"); !ok {
			t.Fatal("the refused file replaced the good configuration")
		}
		if len(logged) == 0 || !strings.Contains(logged[len(logged)-1], want) {
			t.Fatalf("the refusal does not name the Projects: %v\nwant %q", logged, want)
		}
	})
}

// resolvedConfig loads the pool file at path as Serve does and resolves it
// against the emulator.
func resolvedConfig(t *testing.T, path string, cloud scaleway.Cloud) (*ipam.Config, []byte) {
	t.Helper()
	cfg, data, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := inventory.Resolve(context.Background(), cloud, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, data
}
