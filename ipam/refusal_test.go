package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/scaleway/scaleway-sdk-go/scw"
	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

func TestRefusals(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	general := rulesPool(t, rulesConfig(t), "general")
	ip := &Reservation{IP: scaleway.IP{ID: "ip-1", Address: netip.MustParseAddr("172.16.4.15"), Resource: &scaleway.Resource{Type: "instance_server", ID: "vm-1", Name: "vm"}}}
	other := types.NamespacedName{Namespace: "payments", Name: "web"}
	cause := errors.New("informer not synced")
	for _, tc := range []struct {
		name      string
		err       *Error
		reason    Reason
		retryable bool
		fragment  string
	}{
		{"cache unavailable", CacheUnavailable(cause), ReasonCacheUnavailable, true, "nothing was reserved, apply again in a moment"},
		{"outside the pool", OutsidePool(netip.MustParseAddr("172.16.4.50"), dc), ReasonAddressOutsidePool, false, `address 172.16.4.50 is not in pool "dc" (172.16.4.10-172.16.4.20)`},
		{"outside a whole-subnet pool", OutsidePool(netip.MustParseAddr("10.0.1.1"), general), ReasonAddressOutsidePool, false, `not in pool "general" (10.0.0.0/24)`},
		{"pool disabled", PoolDisabled(dc), ReasonPoolDisabled, false, `pool "dc" is disabled (draining)`},
		{"address required", AddressRequired(dc), ReasonAddressRequired, false, "set scw-lb-ipam.io/address to an address in 172.16.4.10-172.16.4.20"},
		{"contended", Contended(dc, 5), ReasonUnavailable, true, `pool "dc": 5 picked addresses were taken by others in a row`},
		{"taken", Taken(ip.Address, dc, &Reservation{IP: scaleway.IP{ID: "ip-9"}, Entry: Entry{Cluster: "old", Service: other}}), ReasonAddressTaken, false, `address 172.16.4.15 of pool "dc" is held by Service payments/web (cluster old)`},
		{"taken by a holder the view does not know", Taken(ip.Address, dc, nil), ReasonAddressTaken, false, `address 172.16.4.15 of pool "dc" is held by another reservation;`},
		{"exhausted", Exhausted(dc, 11, 11), ReasonPoolExhausted, false, `pool "dc" is exhausted (11/11 used)`},
		{"service exists", ServiceExists(svcAPI, ip), ReasonServiceExists, false, "Service payments/api already exists and holds address 172.16.4.15 (IPAM ID ip-1)"},
		{"still held", StillHeld(svcAPI, ip), ReasonStillHeld, true, "still held by the Load Balancer of the previous payments/api"},
		{"ID not found", IDNotFound("ip-1", "fr-par"), ReasonIDNotFound, false, "IPAM IP ip-1 does not exist in region fr-par"},
		{"ID in another region", IDInOtherRegion("ip-1", "nl-ams", "fr-par"), ReasonIDNotUsable, false, "is in region nl-ams, not fr-par"},
		{"ID off the pools", IDOffPools(ip, "web", []string{"dc", "general"}), ReasonIDNotUsable, false, "a pool namespace web may use (dc, general)"},
		{"ID off the pools, none allowed", IDOffPools(ip, "web", nil), ReasonIDNotUsable, false, "a pool namespace web may use (none)"},
		{"used by another Service", UsedBy(ip, other), ReasonIDNotUsable, false, "already used by Service payments/web"},
		{"attached", Attached(ip), ReasonIDNotUsable, false, "is attached to " + ip.Resource.String()},
		{"reserved for another", ReservedForOther(&Reservation{IP: ip.IP, Entry: Entry{Cluster: "old", Service: other}}), ReasonIDNotUsable, false, "reserved for Service payments/web of cluster old"},
		{"releasing", Releasing(ip, svcAPI, general, nil), ReasonReleasing, false, "of Service payments/api is being released after its retention; a fresh address from pool general"},
		{"released as taken", Releasing(ip, svcAPI, general, cause), ReasonReleasing, false, "was released as it was taken back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Reason != tc.reason || tc.err.Retryable() != tc.retryable {
				t.Errorf("%s, retryable %v; want %s, %v", tc.err.Reason, tc.err.Retryable(), tc.reason, tc.retryable)
			}
			if !strings.Contains(tc.err.Error(), tc.fragment) {
				t.Errorf("message lacks %q:\n%s", tc.fragment, tc.err.Error())
			}
			if ReasonOf(fmt.Errorf("admission: %w", tc.err)) != tc.reason {
				t.Errorf("ReasonOf a wrapped refusal = %s", ReasonOf(fmt.Errorf("admission: %w", tc.err)))
			}
		})
	}
}

// TestRefusalCarries: what a refusal keeps beside its words.
func TestRefusalCarries(t *testing.T) {
	general := rulesPool(t, rulesConfig(t), "general")
	ip := &Reservation{IP: scaleway.IP{ID: "ip-1", Address: netip.MustParseAddr("172.16.4.15")}}
	cause := errors.New("gone")
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"the cache's error", errors.Is(CacheUnavailable(cause), cause)},
		{"the release's error", errors.Is(Releasing(ip, svcAPI, general, cause), cause)},
		{"the fallback pool", Releasing(ip, svcAPI, general, nil).Fallback == general},
		{"no reason: internal", ReasonOf(cause) == ReasonInternal},
		{"no error: internal", ReasonOf(nil) == ReasonInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Error("lost")
			}
		})
	}
}

func TestAPIError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		reason    Reason
		retryable bool
		fragment  string
	}{
		{"credentials refused", &scw.ResponseError{StatusCode: http.StatusForbidden}, ReasonPermissionDenied, false, "book IP: the Scaleway API refused the credentials of scw-lb-ipam"},
		{"unavailable: a deadline passes", fmt.Errorf("list: %w", context.DeadlineExceeded), ReasonUnavailable, true, "book IP: the Scaleway IPAM API is unavailable after retries; nothing was reserved"},
		{"anything else", errors.New("boom"), ReasonInternal, false, "book IP: unexpected Scaleway API error: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := APIError("book IP", tc.err)
			if got.Reason != tc.reason || got.Retryable() != tc.retryable || !errors.Is(got, tc.err) {
				t.Errorf("%s (retryable %v, keeps its cause %v), want %s, retryable %v", got.Reason, got.Retryable(), errors.Is(got, tc.err), tc.reason, tc.retryable)
			}
			if !strings.Contains(got.Message, tc.fragment) {
				t.Errorf("message lacks %q:\n%s", tc.fragment, got.Message)
			}
		})
	}
}
