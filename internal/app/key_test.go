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

// TestKeyRotatesWithoutRestart: a new key in the mounted Secret is probed
// and put in use from the next call once the API accepts it; one the API
// refuses a set while the key in use is accepted is kept out, reported
// once, and put in use at a later probe once granted; when the key in use
// is refused too (revoked early), the new one goes in all the same and its
// refusal is reported (metric) without making a replica that served
// unready; a malformed pair changes nothing and is logged once.
func TestKeyRotatesWithoutRestart(t *testing.T) {
	sets := []string{scaleway.IPAMFullAccess, scaleway.PrivateNetworksReadOnly}
	project := []string{emulator.DefaultProjectID}
	third := emulator.Key{AccessKey: "SCWTHIRDKEY000000000", SecretKey: "3c3c3c3c-0000-4000-8000-000000000003", ProjectIDs: project, PermissionSets: sets[:1]}
	srv := emulator.NewTestServer(t, emulator.Options{Keys: []emulator.Key{
		{AccessKey: firstAccess, SecretKey: firstSecret, ProjectIDs: project, PermissionSets: sets},
		{AccessKey: secondAccess, SecretKey: secondSecret, ProjectIDs: project, PermissionSets: sets[:1]},
		third,
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
	cloudOf := func(_ context.Context, k *scaleway.Key) (scaleway.Cloud, error) {
		return scaleway.New(context.Background(), scaleway.Options{Region: "fr-par", Key: k, Backoff: wait.Backoff{Steps: 1},
			ClientOptions: []scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithDefaultProjectID(emulator.DefaultProjectID)}})
	}
	cloud, err := cloudOf(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	var logged []string
	cfg := &ipam.Config{Pools: []*ipam.Pool{{Name: "a", PrivateNetworkID: pn.ID}}}
	r := &keyReloader{dir: dir, key: key, cloud: cloud, candidate: cloudOf, config: func() *ipam.Config { return cfg }, clock: clk,
		log: funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})}
	ctx := context.Background()
	if _, err := cloud.GetPrivateNetwork(ctx, pn.ID); err != nil { // the replica served
		t.Fatal(err)
	}
	r.check(ctx)
	if len(logged) != 0 || key.Err() != nil {
		t.Fatalf("an unchanged key: logged %v, refused %v", logged, key.Err())
	}

	// A new key without PrivateNetworksReadOnly: kept out.
	secretVolume(t, dir, secondAccess, secondSecret)
	r.check(ctx)
	r.check(ctx)
	if key.AccessKey() != firstAccess || len(logged) != 1 || !strings.Contains(logged[0], "the new API key in the Secret is refused") ||
		!strings.Contains(logged[0], "lacks PrivateNetworksReadOnly") || strings.Contains(logged[0], secondSecret) {
		t.Fatalf("a refused new key: in use %s; logged %v", key.AccessKey(), logged)
	}
	if key.Err() != nil {
		t.Fatalf("the key in use is reported refused: %v", key.Err())
	}
	// The grant in IAM changes no file: the probe a minute on sees it.
	srv.AddKey(emulator.Key{AccessKey: secondAccess, SecretKey: secondSecret, ProjectIDs: project, PermissionSets: sets})
	clk.Step(keyProbeEvery)
	r.check(ctx)
	if key.AccessKey() != secondAccess || !strings.Contains(strings.Join(logged, "\n"), "Scaleway API key changed") {
		t.Fatalf("the granted key is not in use: %s; logged %v", key.AccessKey(), logged)
	}
	srv.RevokeKey(firstSecret)
	if _, err := cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: emulator.DefaultProjectID}); err != nil {
		t.Fatalf("a call after the first key's revocation: %v", err)
	}

	// The key in use revoked before its successor, which lacks a set: the
	// successor goes in, its refusal reported; the replica stays ready.
	srv.RevokeKey(secondSecret)
	if _, err := cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: emulator.DefaultProjectID}); scaleway.Classify(err) != scaleway.KindUnauthenticated {
		t.Fatalf("a call with the revoked key: %v", err)
	}
	secretVolume(t, dir, third.AccessKey, third.SecretKey)
	r.check(ctx)
	if key.AccessKey() != third.AccessKey {
		t.Fatalf("with the key in use revoked, the new key is not in use: %s", key.AccessKey())
	}
	want := `
# HELP scw_lb_ipam_scaleway_key_info 1, labelled with the access key of the API key this replica signs its calls with.
# TYPE scw_lb_ipam_scaleway_key_info gauge
scw_lb_ipam_scaleway_key_info{access_key="` + third.AccessKey + `"} 1
# HELP scw_lb_ipam_scaleway_key_refused 1 while the Scaleway API refuses the API key in use: reason denied_authentication (unknown, revoked or expired key) or permissions_denied (permission_set is what its IAM application lacks).
# TYPE scw_lb_ipam_scaleway_key_refused gauge
scw_lb_ipam_scaleway_key_refused{permission_set="",reason="denied_authentication"} 0
scw_lb_ipam_scaleway_key_refused{permission_set="IPAMFullAccess",reason="permissions_denied"} 0
scw_lb_ipam_scaleway_key_refused{permission_set="PrivateNetworksReadOnly",reason="permissions_denied"} 1
`
	if err := testutil.CollectAndCompare(newKeyCollector(key), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if err := key.Unready(scaleway.PrivateNetworksReadOnly); err != nil {
		t.Errorf("a replica that served is made unready: %v", err)
	}

	logged = nil
	secretVolume(t, dir, third.AccessKey, "not-a-secret")
	r.check(ctx)
	r.check(ctx)
	if key.AccessKey() != third.AccessKey || len(logged) != 1 || !strings.Contains(logged[0], "malformed") || strings.Contains(logged[0], "not-a-secret") {
		t.Fatalf("a malformed pair: key %s, logged %v", key.AccessKey(), logged)
	}
}

// TestKeyRefusedAtStartIsUnready: a process whose key was never accepted
// is not ready, each check naming what is refused.
func TestKeyRefusedAtStartIsUnready(t *testing.T) {
	srv := emulator.NewTestServer(t, emulator.Options{Keys: []emulator.Key{
		{AccessKey: firstAccess, SecretKey: firstSecret, ProjectIDs: []string{emulator.DefaultProjectID}, PermissionSets: []string{scaleway.IPAMFullAccess}},
	}})
	pn, err := srv.AddPrivateNetwork("dc", "172.16.32.0/22")
	if err != nil {
		t.Fatal(err)
	}
	key, err := scaleway.NewKey(firstAccess, firstSecret)
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := scaleway.New(context.Background(), scaleway.Options{Region: "fr-par", Key: key, Backoff: wait.Backoff{Steps: 1},
		ClientOptions: []scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithDefaultProjectID(emulator.DefaultProjectID)}})
	if err != nil {
		t.Fatal(err)
	}
	probeKey(context.Background(), cloud, &ipam.Config{Pools: []*ipam.Pool{{Name: "a", PrivateNetworkID: pn.ID}}})
	if err := key.Unready(scaleway.PrivateNetworksReadOnly); err == nil || !strings.Contains(err.Error(), "lacks PrivateNetworksReadOnly") {
		t.Errorf("readiness of a process whose key was never accepted: %v", err)
	}
	if err := key.Unready(""); err != nil {
		t.Errorf("the key authenticates: %v", err)
	}
}
