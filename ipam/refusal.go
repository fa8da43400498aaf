package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Reason says why the allocator refused a request; the webhook maps it to
// its denial and metrics.
type Reason string

// The reasons, each with what it says to the person who applied the
// Service; docs/troubleshooting.md lists them (make generate).
const (
	// ReasonPoolDisabled: the pool is draining (disabled: true); it keeps
	// its Services' reservations and books no new ones.
	ReasonPoolDisabled Reason = "PoolDisabled"
	// ReasonPoolNotAllowed: the namespace may not use the pool (the pool's
	// namespaces).
	ReasonPoolNotAllowed Reason = "PoolNotAllowed"
	// ReasonAddressRequired: the pool hands out only addresses asked for by
	// scw-lb-ipam.io/address (autoAssign: false).
	ReasonAddressRequired Reason = "AddressRequired"
	// ReasonAddressOutsidePool: the address asked for is outside the pool's
	// ranges, excluded, or one of the subnet's addresses IPAM keeps.
	ReasonAddressOutsidePool Reason = "AddressOutsidePool"
	// ReasonAddressTaken: another Service, cluster or resource holds the
	// address asked for.
	ReasonAddressTaken Reason = "AddressTaken"
	// ReasonPoolExhausted: every address of the pool is in use, and none is
	// retained for a deleted Service that could yield.
	ReasonPoolExhausted Reason = "PoolExhausted"
	// ReasonIDNotFound: the IPAM ID in scw-lb-ipam.io/ipam-ids does not
	// exist in the region.
	ReasonIDNotFound Reason = "IPNotFound"
	// ReasonIDNotUsable: the IPAM ID exists but may not serve this Service:
	// another region, off the namespace's pools' networks, attached, or
	// used by or reserved for another Service.
	ReasonIDNotUsable Reason = "IPNotUsable"
	// ReasonUnavailable: Scaleway did not answer after retries, or picked
	// addresses were taken by others too many times in a row; nothing was
	// reserved, apply again.
	ReasonUnavailable Reason = "ScalewayUnavailable"
	// ReasonStillHeld: the Service's reservation is still attached to the
	// Load Balancer of its previous incarnation; retry once it is detached.
	ReasonStillHeld Reason = "AddressStillHeld"
	// ReasonServiceExists: a CREATE of a Service whose live namesake holds
	// the reservation; the apiserver would refuse it anyway.
	ReasonServiceExists Reason = "ServiceExists"
	// ReasonReleasing: one of ours, but too close to its release (or past
	// it) to be taken back; Error.Fallback names the pool to book anew in.
	ReasonReleasing Reason = "ReservationReleasing"
	// ReasonYielding: the pool, or the namespace's share of it, is full of
	// retained reservations of deleted Services; the oldest is being
	// released early: retry after Error.RetryAfter.
	ReasonYielding Reason = "PoolYielding"
	// ReasonWouldYield: a dry run of a CREATE that would get ReasonYielding;
	// not retryable, as nothing was brought forward.
	ReasonWouldYield Reason = "PoolWouldYield"
	// ReasonShareExhausted: the namespace's live Services hold its whole
	// share of the pool.
	ReasonShareExhausted Reason = "NamespaceShareExhausted"
	// ReasonCacheUnavailable: a cache or the Kubernetes API could not
	// answer in time; retry.
	ReasonCacheUnavailable Reason = "CacheUnavailable"
	// ReasonPermissionDenied: Scaleway refused the credentials of
	// scw-lb-ipam; the operator must give its API key IPAM rights.
	ReasonPermissionDenied Reason = "ScalewayPermissionDenied"
	// ReasonInternal: an unexpected error; its message says which.
	ReasonInternal Reason = "Internal"
)

// Error is a refusal with a message for the person who applied the Service:
// what was asked, what is wrong, and how to fix it.
type Error struct {
	Reason  Reason
	Message string
	Err     error // the API error behind it, if any; never shown to users
	// Fallback is the pool a fresh reservation may come from instead
	// (ReasonReleasing).
	Fallback *Pool
	// RetryAfter is when a retryable refusal is worth retrying; zero means
	// in a moment.
	RetryAfter time.Duration
}

// Retryable reports refusals that go away by themselves: the client should
// apply again in a moment. They are answered 429 with Retry-After, which
// kubectl, Helm and every client-go client retry on their own; a 403 no
// client retries. Scaleway unavailable after retries (a deadline, a lost
// answer) and contention pass too.
func (e *Error) Retryable() bool {
	switch e.Reason {
	case ReasonStillHeld, ReasonCacheUnavailable, ReasonYielding, ReasonUnavailable:
		return true
	}
	return false
}

// Retryable reports whether err is a refusal that goes away by itself.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of err, ReasonInternal when it has none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonInternal
}

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Message: fmt.Sprintf(format, args...)}
}

// apiError words a failed Scaleway call for users, keeping the cause.
func apiError(what string, err error) *Error {
	switch scaleway.Classify(err) {
	case scaleway.KindPermissionDenied:
		return &Error{Reason: ReasonPermissionDenied, Err: err,
			Message: fmt.Sprintf("%s: the Scaleway API refused the credentials of scw-lb-ipam: its API key lacks %s; nothing was reserved, the operator must grant it (scw_lb_ipam_scaleway_key_refused names it too)", what, scaleway.IPAMFullAccess)}
	case scaleway.KindUnauthenticated:
		return &Error{Reason: ReasonPermissionDenied, Err: err,
			Message: fmt.Sprintf("%s: the Scaleway API refused the credentials of scw-lb-ipam: its API key is unknown, revoked or expired; nothing was reserved, the operator must put a valid key in its Secret", what)}
	case scaleway.KindUnavailable:
		// Its own retries have run inside the admission: a client that
		// retries at once would only add load to an API in trouble.
		return &Error{Reason: ReasonUnavailable, Err: err, RetryAfter: unavailableRetryAfter,
			Message: fmt.Sprintf("%s: the Scaleway IPAM API is unavailable after retries; nothing was reserved, apply again in a moment", what)}
	}
	return &Error{Reason: ReasonInternal, Err: err, Message: fmt.Sprintf("%s: unexpected Scaleway API error: %v", what, err)}
}

// unavailableRetryAfter is the Retry-After of a Scaleway API unavailable
// after the admission's own retries.
const unavailableRetryAfter = 5 * time.Second

// APIError words a failed Scaleway call for users, keeping the cause.
func APIError(what string, err error) *Error { return apiError(what, err) }

// CacheUnavailable is the refusal when the Service cache cannot answer:
// retryable, nothing was reserved.
func CacheUnavailable(err error) *Error {
	return &Error{Reason: ReasonCacheUnavailable, Err: err,
		Message: "the Service cache of scw-lb-ipam cannot tell which Services use this IP right now; nothing was reserved, apply again in a moment"}
}

// OutsidePool refuses an address the pool does not hand out: one the
// operator has since excluded is refused even to the Service that had it.
func OutsidePool(addr netip.Addr, p *Pool) *Error {
	return refuse(ReasonAddressOutsidePool, "address %s is not in pool %q (%s); ask for an address inside it or for another pool", addr, p.Name, DescribeRanges(p))
}

// PoolDisabled refuses a new booking in a draining pool.
func PoolDisabled(p *Pool) *Error {
	return refuse(ReasonPoolDisabled, "pool %q is disabled (draining): it keeps its reservations but takes no new ones; ask for another pool", p.Name)
}

// AddressRequired refuses a request without an address in a pool that
// hands out only requested ones.
func AddressRequired(p *Pool) *Error {
	return refuse(ReasonAddressRequired, "pool %q hands out only explicitly requested addresses (autoAssign: false); set scw-lb-ipam.io/address to an address in %s", p.Name, DescribeRanges(p))
}

// Contended refuses after attempts picked addresses were taken in a row.
func Contended(p *Pool, attempts int) *Error {
	return refuse(ReasonUnavailable, "pool %q: %d picked addresses were taken by others in a row; the pool is under heavy contention, apply again", p.Name, attempts)
}

// Taken refuses an address someone else holds.
func Taken(addr netip.Addr, p *Pool, h *Reservation) *Error {
	return refuse(ReasonAddressTaken, "address %s of pool %q is held by %s; ask for another address, or omit scw-lb-ipam.io/address to get a free one", addr, p.Name, h)
}

// Exhausted refuses a booking in a pool with no free address.
func Exhausted(p *Pool, used, total uint64) *Error {
	return refuse(ReasonPoolExhausted, "pool %q is exhausted (%d/%d used); ask for another pool, or free addresses in it (scw-lb-ipam status shows who holds them)", p.Name, used, total)
}

// ServiceExists refuses a CREATE whose live namesake holds the reservation:
// the apiserver would refuse it too, so say that instead of "retry".
func ServiceExists(svc types.NamespacedName, ip *Reservation) *Error {
	return refuse(ReasonServiceExists, "Service %s already exists and holds address %s (IPAM ID %s) through its Load Balancer; delete it first, or update it instead of creating it", svc, ip.Address, ip.ID)
}

// StillHeld refuses, retryably, a re-create while the previous Service's
// Load Balancer is being deleted.
func StillHeld(svc types.NamespacedName, ip *Reservation) *Error {
	return refuse(ReasonStillHeld, "address %s (IPAM ID %s) is still held by the Load Balancer of the previous %s, which is being deleted; it is kept for this Service: retry in a moment", ip.Address, ip.ID, svc)
}

// IDNotFound refuses an IPAM ID the region does not have.
func IDNotFound(id, region string) *Error {
	return refuse(ReasonIDNotFound, "IPAM IP %s does not exist in region %s; check the ID (scw ipam ip get %s)", id, region, id)
}

// IDInOtherRegion refuses an IPAM ID of another region.
func IDInOtherRegion(id, region, want string) *Error {
	return refuse(ReasonIDNotUsable, "IPAM IP %s is in region %s, not %s where this cluster's Load Balancers live", id, region, want)
}

// IDOffPools refuses an IPAM ID outside the Private Networks of the pools
// the namespace may use.
func IDOffPools(ip *Reservation, namespace string, allowed []string) *Error {
	return refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is not on the Private Network of a pool namespace %s may use (%s); reserve it on one of those Private Networks", ip.ID, ip.Address, namespace, listOrNone(allowed))
}

// UsedBy refuses an IPAM ID another live Service references.
func UsedBy(ip *Reservation, other types.NamespacedName) *Error {
	return refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is already used by Service %s; an IP serves one Service", ip.ID, ip.Address, other)
}

// Attached refuses an IPAM ID attached to a resource.
func Attached(ip *Reservation) *Error {
	return refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is attached to %s; use an unattached IP", ip.ID, ip.Address, ip.Resource)
}

// ReservedForOther refuses one of the ledger's reservations of another
// Service or cluster.
func ReservedForOther(ip *Reservation) *Error {
	return refuse(ReasonIDNotUsable, "IPAM IP %s (%s) is reserved for Service %s of cluster %s; use an IP reserved for this Service", ip.ID, ip.Address, ip.Service, ip.Cluster)
}

// Releasing answers a restored manifest's reservation that may no longer
// be taken back; gone is the error when it was released as it was taken.
// The webhook books a fresh one in pool instead.
func Releasing(ip *Reservation, svc types.NamespacedName, pool *Pool, gone error) *Error {
	what := "is being released after its retention"
	if gone != nil {
		what = "was released as it was taken back"
	}
	return &Error{Reason: ReasonReleasing, Fallback: pool, Err: gone,
		Message: "IPAM IP " + ip.ID + " (" + ip.Address.String() + ") of Service " + svc.String() + " " + what + "; a fresh address from pool " + pool.Name + " is reserved instead"}
}

// DescribeRanges is the address space of p, for refusals.
func DescribeRanges(p *Pool) string {
	s := p.Prefix().String()
	if len(p.Ranges) > 0 {
		s = strings.Join(p.Ranges, ", ")
	}
	if len(p.Exclude) > 0 {
		s += " except " + strings.Join(p.Exclude, ", ")
	}
	return s
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
