package scaleway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

const (
	oldAccess, oldSecret = "SCWOLDKEY00000000000", "0a0a0a0a-0000-4000-8000-000000000001"
	newAccess, newSecret = "SCWNEWKEY00000000000", "0b0b0b0b-0000-4000-8000-000000000002"
)

// keyEnv is an emulator that knows the old key (IPAM only, on testProject)
// and a Cloud signing with it through a Key.
func keyEnv(t *testing.T) (*emulator.Server, Cloud, *Key, string) {
	t.Helper()
	srv := emulator.NewTestServer(t, emulator.Options{ProjectID: testProject, Keys: []emulator.Key{
		{AccessKey: oldAccess, SecretKey: oldSecret, ProjectIDs: []string{testProject}, PermissionSets: []string{IPAMFullAccess}},
	}})
	pn, err := srv.AddPrivateNetwork("pool", "172.16.32.0/22")
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey(oldAccess, oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	// No SDK key: the Key signs every call.
	c, err := New(context.Background(), Options{Region: "fr-par", Key: key, Backoff: wait.Backoff{Steps: 1},
		ClientOptions: []scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithDefaultProjectID(testProject)}})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, key, pn.ID
}

// TestKeyNamesTheMissingPermissionSet: a 403 on a Private Network read is
// PrivateNetworksReadOnly missing, which IPAM calls that succeed do not
// clear; the grant in IAM does, at the next read.
func TestKeyNamesTheMissingPermissionSet(t *testing.T) {
	srv, c, key, pn := keyEnv(t)
	ctx := context.Background()
	if _, err := c.GetPrivateNetwork(ctx, pn); Classify(err) != KindPermissionDenied {
		t.Fatalf("reading the network without PrivateNetworksReadOnly: %v", err)
	}
	// A pool's listing names its network only: the list names the key's
	// Project all the same, which IAM requires of a key scoped to it.
	if _, err := c.ListIPs(ctx, ListFilter{PrivateNetworkID: pn}); err != nil {
		t.Fatalf("listing a network's IPs with a key scoped to its Project: %v", err)
	}
	var r Refusal
	if !errors.As(key.Err(), &r) || r.PermissionSet != PrivateNetworksReadOnly || r.Status != 403 || r.Operation != "GetPrivateNetwork" {
		t.Fatalf("the key reports %v, want PrivateNetworksReadOnly missing", key.Err())
	}
	if msg := r.Error(); !strings.Contains(msg, oldAccess) || strings.Contains(msg, oldSecret) || !strings.Contains(msg, "permission set PrivateNetworksReadOnly") {
		t.Errorf("the refusal says %q: it must name the access key and the set, never the secret", msg)
	}
	srv.AddKey(emulator.Key{AccessKey: oldAccess, SecretKey: oldSecret, ProjectIDs: []string{testProject}, PermissionSets: []string{IPAMFullAccess, PrivateNetworksReadOnly}})
	if _, err := c.GetPrivateNetwork(ctx, pn); err != nil {
		t.Fatal(err)
	}
	if err := key.Err(); err != nil {
		t.Errorf("after the grant, the key reports %v", err)
	}
}

// TestKeyRotatesBetweenCalls drives the dangerous order: a call signed with
// the old key is still on its way when the new key is set and the old one
// revoked. Its 401 is the old key's: the call is sent again with the new
// key and succeeds, and the new key is not reported refused.
func TestKeyRotatesBetweenCalls(t *testing.T) {
	srv, c, key, _ := keyEnv(t)
	ctx := context.Background()
	srv.AddKey(emulator.Key{AccessKey: newAccess, SecretKey: newSecret, ProjectIDs: []string{testProject}, PermissionSets: []string{IPAMFullAccess}})
	srv.SetLatency(emulator.OpListIPs, 300*time.Millisecond)
	inFlight := make(chan error, 1)
	go func() {
		_, err := c.ListIPs(ctx, ListFilter{ProjectID: testProject})
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond) // the call is sent, held by the latency
	if changed, err := key.Set(newAccess, newSecret); !changed || err != nil {
		t.Fatalf("Set: %v, %v", changed, err)
	}
	srv.RevokeKey(oldSecret)
	if err := <-inFlight; err != nil {
		t.Fatalf("the call signed with the revoked key, sent again with the new one: %v", err)
	}
	var statuses []int
	for _, r := range srv.Requests() {
		if r.Op == emulator.OpListIPs {
			statuses = append(statuses, r.Status)
		}
	}
	if len(statuses) != 2 || statuses[0] != 401 || statuses[1] != 200 {
		t.Errorf("ListIPs answered %v, want 401 to the old key then 200 to the new", statuses)
	}
	if err := key.Err(); err != nil {
		t.Fatalf("the old key's 401 is held against the new key: %v", err)
	}
	srv.SetLatency(emulator.OpListIPs, 0)
	srv.RevokeKey(newSecret)
	if _, err := c.ListIPs(ctx, ListFilter{ProjectID: testProject}); Classify(err) != KindUnauthenticated {
		t.Fatalf("a call with the revoked new key: %v", err)
	}
	var r Refusal
	if !errors.As(key.Err(), &r) || r.Status != 401 || r.Reason() != "denied_authentication" || r.AccessKey != newAccess {
		t.Errorf("the key reports %v, want the new key refused", key.Err())
	}
	if key.Unready("") != nil {
		t.Errorf("a process that was accepted before is unready: %v", key.Unready(""))
	}
}

// TestKeyReadsDoNotProveWrites: a key that may read IPAM but not book is
// refused IPAMFullAccess at its booking, and the reads that follow do not
// clear it; the process, which reads, stays ready. One whose key may not
// read IPAM either is not ready.
func TestKeyReadsDoNotProveWrites(t *testing.T) {
	srv, c, key, pn := keyEnv(t)
	ctx := context.Background()
	srv.AddKey(emulator.Key{AccessKey: oldAccess, SecretKey: oldSecret, ProjectIDs: []string{testProject}, PermissionSets: []string{"IPAMReadOnly"}})
	if _, err := c.BookIP(ctx, BookRequest{PrivateNetworkID: pn}); Classify(err) != KindPermissionDenied {
		t.Fatalf("booking with IPAMReadOnly: %v", err)
	}
	if _, err := c.ListIPs(ctx, ListFilter{PrivateNetworkID: pn}); err != nil {
		t.Fatal(err)
	}
	if err := key.Refused(IPAMFullAccess); err == nil {
		t.Error("a read cleared the refusal of IPAMFullAccess")
	}
	if err := key.Unready(IPAMFullAccess); err != nil {
		t.Errorf("a process that reads IPAM is made unready by a refused booking: %v", err)
	}
	// A key that may not even read IPAM, in a process that never could:
	// not ready.
	srv.AddKey(emulator.Key{AccessKey: oldAccess, SecretKey: oldSecret, ProjectIDs: []string{testProject}, PermissionSets: []string{PrivateNetworksReadOnly}})
	fresh, err := NewKey(oldAccess, oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := New(ctx, Options{Region: "fr-par", Key: fresh, Backoff: wait.Backoff{Steps: 1},
		ClientOptions: []scw.ClientOption{scw.WithAPIURL(srv.URL()), scw.WithDefaultProjectID(testProject)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.ListIPs(ctx, ListFilter{PrivateNetworkID: pn}); Classify(err) != KindPermissionDenied {
		t.Fatalf("listing without IPAM rights: %v", err)
	}
	if err := fresh.Unready(IPAMFullAccess); err == nil {
		t.Error("a process whose key never read IPAM is ready")
	}
}

// TestKeySetRefusesMalformed: a malformed pair changes nothing and its
// error shows no part of it.
func TestKeySetRefusesMalformed(t *testing.T) {
	key, err := NewKey(oldAccess, oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ access, secret string }{
		{"not-an-access-key", newSecret},
		{newAccess, "not-a-uuid-secret"},
	} {
		changed, err := key.Set(tt.access, tt.secret)
		if changed || err == nil || strings.Contains(err.Error(), tt.access) || strings.Contains(err.Error(), tt.secret) {
			t.Errorf("Set(%q, %q): %v, %v", tt.access, tt.secret, changed, err)
		}
	}
	if key.AccessKey() != oldAccess {
		t.Errorf("a malformed pair replaced the key: %s", key.AccessKey())
	}
	if changed, err := key.Set(oldAccess, oldSecret); changed || err != nil {
		t.Errorf("setting the pair in use: %v, %v", changed, err)
	}
}
