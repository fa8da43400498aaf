package emulator

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	ipam "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	vpc "github.com/scaleway/scaleway-sdk-go/api/vpc/v2"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

const (
	ipamOnlySecret  = "11111111-2222-4333-8444-555555555555"
	otherProjSecret = "22222222-3333-4444-8555-666666666666"
	otherProject    = "7c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"
)

// TestKeysRefuseAsScaleway: a key without PrivateNetworksReadOnly may use
// IPAM but not read a Private Network; a key of another Project may touch
// nothing of this one; a revoked key nothing at all. Each refusal has the
// status, error type and body of the recorded ones.
func TestKeysRefuseAsScaleway(t *testing.T) {
	srv, owner := setup(t, func(o *Options) {
		o.Keys = []Key{
			{AccessKey: "SCWIPAMONLY000000000", SecretKey: ipamOnlySecret, ProjectIDs: []string{testProject}, PermissionSets: []string{"IPAMFullAccess"}},
			{AccessKey: "SCWOTHERPROJECT00000", SecretKey: otherProjSecret, ProjectIDs: []string{otherProject}, PermissionSets: []string{"IPAMFullAccess", "PrivateNetworksReadOnly"}},
		}
	})
	pn, err := srv.AddPrivateNetwork("pool", "172.16.32.0/22")
	if err != nil {
		t.Fatal(err)
	}
	booked := mustAddIP(t, srv, pn.ID, "172.16.32.7", nil, nil)
	ipamOnly := newClients(t, srv, scw.WithAuth("SCWIPAMONLY000000000", ipamOnlySecret))
	other := newClients(t, srv, scw.WithAuth("SCWOTHERPROJECT00000", otherProjSecret))
	region := scw.RegionFrPar
	project := testProject

	if _, err := ipamOnly.ipam.ListIPs(&ipam.ListIPsRequest{Region: region, ProjectID: &project}); err != nil {
		t.Errorf("an IPAMFullAccess key lists its Project's IPs: %v", err)
	}
	if _, err := ipamOnly.ipam.BookIP(&ipam.BookIPRequest{Region: region, ProjectID: project, Source: &ipam.Source{PrivateNetworkID: &pn.ID}}); err != nil {
		t.Errorf("an IPAMFullAccess key books in its Project: %v", err)
	}
	_, err = ipamOnly.vpc.GetPrivateNetwork(&vpc.GetPrivateNetworkRequest{Region: region, PrivateNetworkID: pn.ID})
	wantDenied(t, "GetPrivateNetwork without PrivateNetworksReadOnly", err, "read", "private_network")

	_, err = other.ipam.ListIPs(&ipam.ListIPsRequest{Region: region, ProjectID: &project})
	wantDenied(t, "ListIPs of another Project", err, "read", "ip")
	_, err = other.ipam.ListIPs(&ipam.ListIPsRequest{Region: region})
	wantDenied(t, "ListIPs across the organisation", err, "read", "ip")
	_, err = other.ipam.GetIP(&ipam.GetIPRequest{Region: region, IPID: booked})
	wantDenied(t, "GetIP of another Project's IP", err, "read", "ip")
	_, err = other.ipam.BookIP(&ipam.BookIPRequest{Region: region, ProjectID: project, Source: &ipam.Source{PrivateNetworkID: &pn.ID}})
	wantDenied(t, "BookIP in another Project", err, "write", "ip")
	_, err = other.vpc.GetPrivateNetwork(&vpc.GetPrivateNetworkRequest{Region: region, PrivateNetworkID: pn.ID})
	wantDenied(t, "GetPrivateNetwork of another Project", err, "read", "private_network")

	srv.RevokeKey(ipamOnlySecret)
	_, err = ipamOnly.ipam.ListIPs(&ipam.ListIPsRequest{Region: region, ProjectID: &project})
	var unauth *scw.DeniedAuthenticationError
	if !errors.As(err, &unauth) || unauth.Method != "api_key" || unauth.Reason != "not_found" {
		t.Errorf("a revoked key: %T %v, want 401 denied_authentication (api_key, not_found)", err, err)
	}
	if _, err := owner.ipam.ListIPs(&ipam.ListIPsRequest{Region: region}); err != nil {
		t.Errorf("the owner's key lists across the organisation: %v", err)
	}
	got := srv.Requests()
	if n := slices.IndexFunc(got, func(r Request) bool { return r.Op == OpBookIP && r.Status == 403 }); n < 0 {
		t.Errorf("the refused booking is not in the request log")
	}
	if len(srv.IPs()) != 2 {
		t.Errorf("IPs after the refused booking: %d, want the two booked by allowed keys", len(srv.IPs()))
	}
}

// TestKeyRefusalBodiesAreRecorded: the 401 and 403 bodies have the keys and
// fixed values of the recorded ones.
func TestKeyRefusalBodiesAreRecorded(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(recordingsDir(t), "scaleway-real-error-bodies.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Errors []struct {
			Code int    `json:"code"`
			Type string `json:"type"`
			Body string `json:"response_body"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		code int
		typ  string
		emu  map[string]any
	}{
		{401, "denied_authentication", errDeniedAuthentication().body.(map[string]any)},
		{403, "permissions_denied", faultBody(OpGetPrivateNetwork, 403)},
	} {
		i := slices.IndexFunc(rec.Errors, func(e struct {
			Code int    `json:"code"`
			Type string `json:"type"`
			Body string `json:"response_body"`
		}) bool {
			return e.Code == tt.code && e.Type == tt.typ
		})
		if i < 0 {
			t.Fatalf("no recorded %d %s", tt.code, tt.typ)
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(rec.Errors[i].Body), &want); err != nil {
			t.Fatal(err)
		}
		emu := roundTrip(t, tt.emu)
		for k, v := range want {
			got, ok := emu[k]
			switch {
			case !ok:
				t.Errorf("%d %s: the emulator's body has no %q (recorded %v)", tt.code, tt.typ, k, v)
			case k != "details" && got != v:
				t.Errorf("%d %s: %q is %v, recorded %v", tt.code, tt.typ, k, got, v)
			}
		}
		if len(emu) != len(want) {
			t.Errorf("%d %s: the emulator's body %v has other keys than the recorded %v", tt.code, tt.typ, emu, want)
		}
	}
}

func roundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantDenied checks a 403 permissions_denied naming action on resource.
func wantDenied(t *testing.T, what string, err error, action, resource string) {
	t.Helper()
	var denied *scw.PermissionsDeniedError
	if !errors.As(err, &denied) {
		t.Errorf("%s: %T %v, want 403 permissions_denied", what, err, err)
		return
	}
	if len(denied.Details) != 1 || denied.Details[0].Action != action || denied.Details[0].Resource != resource {
		t.Errorf("%s: details %+v, want %s on %s", what, denied.Details, action, resource)
	}
}
