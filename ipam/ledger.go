package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// Tags of the ledger. Every IP the project books carries TagMarker and the
// cluster, pool and service tags; the sweeper adds the others.
const (
	TagMarker        = "scw-lb-ipam"
	TagCluster       = "scw-lb-ipam/cluster="
	TagPool          = "scw-lb-ipam/pool="
	TagService       = "scw-lb-ipam/service="
	TagUID           = "scw-lb-ipam/uid="
	TagOrphanedSince = "scw-lb-ipam/orphaned-since="
	// TagReleaseAt is when a retained reservation is released: written
	// with orphaned-since by whoever starts the retention, and read by
	// every reader, whatever its own pool file says (see Retention).
	TagReleaseAt = "scw-lb-ipam/release-at="
	// TagNamespace makes one namespace's reservations one listing (shares);
	// it repeats the service tag's namespace, which a tag filter cannot
	// match by prefix.
	TagNamespace = "scw-lb-ipam/namespace="
	// TagEarlyRelease marks a release-at a full pool brought forward (see
	// Retention.Yield): the sweeper never moves it back to the pool file's
	// retention.
	TagEarlyRelease = "scw-lb-ipam/early-release"
)

// Entry is the ledger read from (or written to) the tags of one IP.
type Entry struct {
	Cluster string
	Pool    string
	Service types.NamespacedName
	// UID is empty until the sweeper back-fills it: the Service has no UID
	// at CREATE admission.
	UID string
	// OrphanedSince is the zero time while a live Service references the IP.
	OrphanedSince time.Time
	// ReleaseAt is when the retained reservation is released: the ledger
	// says when. It means nothing without OrphanedSince, and goes with it.
	// Zero on a reservation retained by an older version (see
	// Retention.When); one before OrphanedSince is stale.
	ReleaseAt time.Time
	// Namespace is the namespace tag as read: empty on a reservation
	// booked before the tag existed. Tags always writes Service's.
	Namespace string
	// Early: ReleaseAt was brought forward by a full pool or share; it
	// goes with ReleaseAt.
	Early bool
	// Other holds tags that are not ours, kept untouched on every rewrite.
	Other []string
}

// ParseEntry reads the ledger from an IP's tags. ok is false when the IP is
// not one of ours (no marker, or no cluster tag): such IPs are never changed.
func ParseEntry(tags []string) (e Entry, ok bool) {
	marker := false
	for _, t := range tags {
		switch {
		case t == TagMarker:
			marker = true
		case strings.HasPrefix(t, TagCluster):
			e.Cluster = t[len(TagCluster):]
		case strings.HasPrefix(t, TagPool):
			e.Pool = t[len(TagPool):]
		case strings.HasPrefix(t, TagService):
			ns, name, _ := strings.Cut(t[len(TagService):], "/")
			e.Service = types.NamespacedName{Namespace: ns, Name: name}
		case strings.HasPrefix(t, TagUID):
			e.UID = t[len(TagUID):]
		case strings.HasPrefix(t, TagOrphanedSince):
			if ts, err := time.Parse(time.RFC3339, t[len(TagOrphanedSince):]); err == nil {
				e.OrphanedSince = ts
			}
		case strings.HasPrefix(t, TagReleaseAt):
			if ts, err := time.Parse(time.RFC3339, t[len(TagReleaseAt):]); err == nil {
				e.ReleaseAt = ts
			}
		case strings.HasPrefix(t, TagNamespace):
			e.Namespace = t[len(TagNamespace):]
		case t == TagEarlyRelease:
			e.Early = true
		default:
			e.Other = append(e.Other, t)
		}
	}
	return e, marker && e.Cluster != ""
}

// Tags renders the entry, ours first in a fixed order, then the foreign tags.
func (e Entry) Tags() []string {
	tags := []string{TagMarker, TagCluster + e.Cluster, TagPool + e.Pool, TagService + e.Service.String(), NamespaceTag(e.Service.Namespace)}
	if e.UID != "" {
		tags = append(tags, TagUID+e.UID)
	}
	if !e.OrphanedSince.IsZero() {
		tags = append(tags, TagOrphanedSince+ceilSecond(e.OrphanedSince).Format(time.RFC3339))
		if !e.ReleaseAt.IsZero() {
			tags = append(tags, TagReleaseAt+ceilSecond(e.ReleaseAt).Format(time.RFC3339))
			if e.Early {
				tags = append(tags, TagEarlyRelease)
			}
		}
	}
	return append(tags, e.Other...)
}

// ceilSecond is t in UTC rounded up to the whole second the tag can hold:
// rounded down, the tag would predate the moment the IP was found
// orphaned, and cut up to a second off the retention and the reuse window.
func ceilSecond(t time.Time) time.Time {
	t = t.UTC()
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

// Owns reports whether the entry belongs to cluster.
func (e Entry) Owns(cluster string) bool { return e.Cluster == cluster }

// ServiceTag is the tag that finds a Service's reservations with ListIPs.
func ServiceTag(svc types.NamespacedName) string { return TagService + svc.String() }

// NamespaceTag is the tag that finds a namespace's reservations with
// ListIPs.
func NamespaceTag(ns string) string { return TagNamespace + ns }

// Complete reports whether the entry holds every tag this version writes:
// the namespace tag, and with orphaned-since a release-at at or after it.
// The sweeper rewrites the others (see Retention.Settle).
func (e Entry) Complete() bool {
	return e.Namespace == e.Service.Namespace && (e.OrphanedSince.IsZero() || e.scheduled())
}

// scheduled reports whether the ledger says when the retained reservation
// is released: a release-at, not before orphaned-since (one before it is
// stale: left by an older version or a hand edit).
func (e Entry) scheduled() bool {
	return !e.OrphanedSince.IsZero() && !e.ReleaseAt.IsZero() && !e.ReleaseAt.Before(e.OrphanedSince)
}

// SameTags reports whether two tag lists hold the same tags in any order:
// the sweeper releases an IP only if its tags did not change since it decided.
func SameTags(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Reason says why the allocator refused a request; the webhook maps it to
// its denial and metrics.
type Reason string

const (
	ReasonPoolDisabled       Reason = "PoolDisabled"
	ReasonPoolNotAllowed     Reason = "PoolNotAllowed"
	ReasonAddressRequired    Reason = "AddressRequired"
	ReasonAddressOutsidePool Reason = "AddressOutsidePool"
	ReasonAddressTaken       Reason = "AddressTaken"
	ReasonPoolExhausted      Reason = "PoolExhausted"
	ReasonIDNotFound         Reason = "IPNotFound"
	ReasonIDNotUsable        Reason = "IPNotUsable"
	ReasonUnavailable        Reason = "ScalewayUnavailable"
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
	ReasonPermissionDenied Reason = "ScalewayPermissionDenied"
	ReasonInternal         Reason = "Internal"
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
// apply again in a moment.
func (e *Error) Retryable() bool {
	return e.Reason == ReasonStillHeld || e.Reason == ReasonCacheUnavailable || e.Reason == ReasonYielding
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
			Message: fmt.Sprintf("%s: the Scaleway API refused the credentials of scw-lb-ipam; the operator must give its API key IPAM rights", what)}
	case scaleway.KindUnavailable:
		return &Error{Reason: ReasonUnavailable, Err: err,
			Message: fmt.Sprintf("%s: the Scaleway IPAM API is unavailable after retries; nothing was reserved, apply again in a moment", what)}
	}
	return &Error{Reason: ReasonInternal, Err: err, Message: fmt.Sprintf("%s: unexpected Scaleway API error: %v", what, err)}
}

// Request is one reservation to make: an address from one pool for one
// Service.
type Request struct {
	Pool    *Pool
	Service types.NamespacedName
	// Address is the specific address asked for; zero lets the pool choose.
	Address netip.Addr
	// DryRun validates and predicts without booking or re-tagging anything.
	DryRun bool
	// Own are the IDs the Service references now (an UPDATE): they are its
	// own, attached to its own Load Balancer, and may be kept.
	Own []string
}

// Reservation is an IP reserved (or validated) for a Service.
type Reservation struct {
	ID               string
	Address          netip.Addr // zero in a dry run where IPAM would choose
	Pool             string
	PrivateNetworkID string
	// Reused: an earlier reservation of the same Service and pool was
	// taken back (the sticky path).
	Reused bool
	// AdoptedFrom is the cluster a reused reservation was taken over from
	// (the pool's adoptFrom); empty when it was this cluster's.
	AdoptedFrom string
	// Booked: this call booked the IP. The caller releases it when the rest
	// of the admission fails, so nothing leaks until the sweeper's grace.
	Booked bool
	// BringYourOwn: the ID was reserved outside this project; never released.
	BringYourOwn bool
}

// Holder describes who holds an address, for denials and the status command.
type Holder struct {
	IPID     string
	Cluster  string
	Service  types.NamespacedName
	Resource *scaleway.Resource
	// RetainedSince is when the sweeper found the reservation unreferenced;
	// zero while a Service uses it.
	RetainedSince time.Time
	// ReleaseAt is the ledger's release time (see Entry.ReleaseAt).
	ReleaseAt time.Time
	// UID is the back-filled uid of the Service, empty while pending.
	UID string
}

func (h Holder) String() string {
	switch {
	case h.Resource != nil:
		return h.Resource.String()
	case h.Service.Name != "" && h.Cluster != "":
		return fmt.Sprintf("Service %s (cluster %s)", h.Service, h.Cluster)
	case h.IPID != "":
		return "IPAM IP " + h.IPID
	}
	return "another reservation"
}

// entry is the part of the ledger the holder keeps: what the release
// protocol (Retention) decides from.
func (h Holder) entry() Entry {
	return Entry{OrphanedSince: h.RetainedSince, ReleaseAt: h.ReleaseAt, UID: h.UID}
}

func holderOf(ip *scaleway.IP) Holder {
	h := Holder{IPID: ip.ID, Resource: ip.Resource}
	if e, ok := ParseEntry(ip.Tags); ok {
		h.Cluster, h.Service, h.RetainedSince, h.ReleaseAt, h.UID = e.Cluster, e.Service, e.OrphanedSince, e.ReleaseAt, e.UID
	}
	return h
}
