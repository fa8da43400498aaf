package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/scaleway/scaleway-sdk-go/scw"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

const (
	firstAccess, firstSecret   = "SCWFIRSTKEY000000000", "1a1a1a1a-0000-4000-8000-000000000001"
	secondAccess, secondSecret = "SCWSECONDKEY00000000", "2b2b2b2b-0000-4000-8000-000000000002"
)

// secretVolume writes the pair as the kubelet writes a Secret volume.
func secretVolume(t *testing.T, dir, access, secret string) {
	t.Helper()
	if err := localrun.WriteSecretVolume(dir, map[string]string{accessKeyFile: access + "\n", secretKeyFile: secret + "\n"}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyRotatesWithoutRestart: a new key in the mounted Secret is used
// from the next call; a new key the API refuses a permission set is
// reported (readiness, metric) naming that set, until the grant shows at
// a later probe; a malformed pair changes nothing and is logged once.
func TestKeyRotatesWithoutRestart(t *testing.T) {
	sets := []string{scaleway.IPAMFullAccess, scaleway.PrivateNetworksReadOnly}
	project := []string{emulator.DefaultProjectID}
	srv := emulator.NewTestServer(t, emulator.Options{Keys: []emulator.Key{
		{AccessKey: firstAccess, SecretKey: firstSecret, ProjectIDs: project, PermissionSets: sets},
		{AccessKey: secondAccess, SecretKey: secondSecret, ProjectIDs: project, PermissionSets: sets[:1]},
	}})
	pn, err := srv.AddPrivateNetwork("dc", "172.16.32.0/22")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secretVolume(t, dir, firstAccess, firstSecret)
	key, err := newKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := scaleway.New(context.Background(), scaleway.Options{Region: "fr-par", Key: key, Backoff: wait.Backoff{Steps: 1},
		ClientOptions: []scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithDefaultProjectID(emulator.DefaultProjectID)}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	var logged []string
	cfg := &ipam.Config{Pools: []*ipam.Pool{{Name: "a", PrivateNetworkID: pn.ID}}}
	r := &keyReloader{dir: dir, key: key, cloud: cloud, config: func() *ipam.Config { return cfg }, clock: clk,
		log: funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})}
	ctx := context.Background()
	ready := func() error { return key.Refused(scaleway.PrivateNetworksReadOnly) }

	r.check(ctx)
	if len(logged) != 0 || ready() != nil {
		t.Fatalf("an unchanged key: logged %v, ready %v", logged, ready())
	}

	secretVolume(t, dir, secondAccess, secondSecret)
	r.check(ctx)
	if key.AccessKey() != secondAccess || !strings.Contains(strings.Join(logged, "\n"), "Scaleway API key changed") {
		t.Fatalf("the new key is not in use: %s; logged %v", key.AccessKey(), logged)
	}
	err = ready()
	if err == nil || !strings.Contains(err.Error(), "lacks PrivateNetworksReadOnly") || strings.Contains(err.Error(), secondSecret) {
		t.Fatalf("readiness with a key that may not read the network: %v", err)
	}
	want := `
# HELP scw_lb_ipam_scaleway_key_info 1, labelled with the access key of the API key this replica signs its calls with.
# TYPE scw_lb_ipam_scaleway_key_info gauge
scw_lb_ipam_scaleway_key_info{access_key="` + secondAccess + `"} 1
# HELP scw_lb_ipam_scaleway_key_refused 1 while the Scaleway API refuses the API key in use: reason denied_authentication (unknown, revoked or expired key) or permissions_denied (permission_set is what its IAM application lacks).
# TYPE scw_lb_ipam_scaleway_key_refused gauge
scw_lb_ipam_scaleway_key_refused{permission_set="",reason="denied_authentication"} 0
scw_lb_ipam_scaleway_key_refused{permission_set="IPAMFullAccess",reason="permissions_denied"} 0
scw_lb_ipam_scaleway_key_refused{permission_set="PrivateNetworksReadOnly",reason="permissions_denied"} 1
`
	if err := testutil.CollectAndCompare(newKeyCollector(key), strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// The grant in IAM changes no file: the next probe, a minute on,
	// sees it; the revocation of the first key no longer matters.
	srv.AddKey(emulator.Key{AccessKey: secondAccess, SecretKey: secondSecret, ProjectIDs: project, PermissionSets: sets})
	srv.RevokeKey(firstSecret)
	r.check(ctx)
	if ready() == nil {
		t.Fatal("probed again before keyProbeEvery")
	}
	clk.Step(keyProbeEvery)
	r.check(ctx)
	if err := ready(); err != nil {
		t.Fatalf("after the grant: %v", err)
	}
	if _, err := cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: emulator.DefaultProjectID}); err != nil {
		t.Fatalf("a call after the first key's revocation: %v", err)
	}

	logged = nil
	secretVolume(t, dir, secondAccess, "not-a-secret")
	r.check(ctx)
	r.check(ctx)
	if key.AccessKey() != secondAccess || len(logged) != 1 || !strings.Contains(logged[0], "malformed") || strings.Contains(logged[0], "not-a-secret") {
		t.Fatalf("a malformed pair: key %s, logged %v", key.AccessKey(), logged)
	}
	if _, err := cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: emulator.DefaultProjectID}); err != nil {
		t.Fatalf("the key in use after a malformed one: %v", err)
	}
}
