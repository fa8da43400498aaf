package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/ipamtest"
)

func TestConfigReload(t *testing.T) {
	srv := ipamtest.NewTestServer(t, ipamtest.Options{SecretKey: "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"})
	nodes, _ := srv.AddPrivateNetwork("nodes", "172.16.0.0/22")
	dc, _ := srv.AddPrivateNetwork("dc", "172.16.32.0/22")
	cloud, err := ipam.NewCloud(context.Background(), ipam.CloudOptions{Region: "fr-par", ClientOptions: []scw.ClientOption{
		scw.WithAPIURL(srv.URL()), scw.WithAuth("SCWABCDEFGHIJKLMNOPQ", "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"),
		scw.WithDefaultProjectID(ipamtest.DefaultProjectID),
	}})
	if err != nil {
		t.Fatal(err)
	}
	file := func(pools string) string {
		return "clusterName: test\nregion: fr-par\nclusterPrivateNetworkID: " + nodes.ID + "\npools:\n" + pools
	}
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
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Resolve(context.Background(), cloud); err != nil {
		t.Fatal(err)
	}
	alloc := ipam.NewAllocator(ipam.AllocatorOptions{Cloud: cloud, Config: cfg})
	var logged []string
	r := &configReloader{path: path, cloud: cloud, alloc: alloc, log: funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})}
	r.last, _ = os.ReadFile(path)

	write(file("  - {name: a, privateNetworkID: " + dc.ID + "}\n  - {name: b, privateNetworkID: " + nodes.ID + ", default: true}\n"))
	r.check(context.Background())
	if _, ok := alloc.Config().Pool("b"); !ok {
		t.Fatalf("good change not applied; log: %v", logged)
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

func TestParseServeFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "scw-lb-ipam")
	o, err := ParseFlags([]string{"--config", "/p.yaml", "--excluded-namespaces", "kube-system, infra"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Excluded, ",") != "kube-system,infra,scw-lb-ipam" || o.LeaderElectNS != "scw-lb-ipam" || o.ConfigFile != "/p.yaml" || !o.TLS.SelfManaged || o.TLS.Namespace != "scw-lb-ipam" {
		t.Fatalf("options %+v", o)
	}
	for _, bad := range [][]string{{"--webhook-port", "0"}, {"--occupancy-ttl", "1ms"}, {"extra"}, {"--nope"}, {"--tls-mode", "magic"}, {"--sweep-interval", "0s"}} {
		if _, err := ParseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	t.Setenv("POD_NAMESPACE", "")
	if _, err := ParseFlags(nil); err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE") {
		t.Errorf("self-managed TLS without POD_NAMESPACE: %v", err)
	}
	if o, err := ParseFlags([]string{"--tls-mode", "cert-manager"}); err != nil || o.TLS.SelfManaged {
		t.Errorf("cert-manager mode: %+v %v", o.TLS, err)
	}
}
