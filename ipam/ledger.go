package ipam

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
	// TagReleaseFor is the orphaned-since the release-at was written for,
	// written with it. A version without it keeps it among the tags it
	// does not know: after it took the reservation back and retained it
	// again, or brought its release forward, release-for names another
	// retention, and every reader knows that release-at was not written
	// by this version's rules for this retention (see Retention.When).
	TagReleaseFor = "scw-lb-ipam/release-for="
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
	// Namespace is the namespace tag as read: the namespace whose share
	// the reservation counts in, its Service's, or for a Gateway's Service
	// in a controller's namespace its Gateway's (request.JudgedNamespace).
	// Empty on a reservation booked before the tag existed: Tags writes the
	// Service's then (JudgedNamespace).
	Namespace string
	// Early: ReleaseAt was brought forward by a full pool or share; it
	// goes with ReleaseAt.
	Early bool
	// untied: ReleaseAt was read without a TagReleaseFor naming this
	// OrphanedSince (see ParseEntry); the sweeper ties it (Complete).
	untied bool
	// Other holds tags that are not ours, kept untouched on every rewrite.
	Other []string
}

// ParseEntry reads the ledger from an IP's tags. ok is false when the IP is
// not one of ours (no marker, or no cluster tag): such IPs are never changed.
func ParseEntry(tags []string) (e Entry, ok bool) {
	marker := false
	var releaseFor time.Time
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
		case strings.HasPrefix(t, TagReleaseFor):
			if ts, err := time.Parse(time.RFC3339, t[len(TagReleaseFor):]); err == nil {
				releaseFor = ts
			}
		default:
			e.Other = append(e.Other, t)
		}
	}
	switch {
	case e.ReleaseAt.IsZero():
		// early-release kept alone by an older version's rewrite.
		e.Early = false
	case !releaseFor.Equal(e.OrphanedSince):
		// Not written for this retention: by a version without the tag
		// (its own release time, or one it brought forward), or kept
		// from an earlier retention. Read with caution (Retention.When),
		// and tied by the sweeper's next write (Settle).
		e.untied = true
	}
	return e, marker && e.Cluster != ""
}

// Tags renders the entry, ours first in a fixed order, then the foreign tags.
func (e Entry) Tags() []string {
	tags := []string{TagMarker, TagCluster + e.Cluster, TagPool + e.Pool, TagService + e.Service.String(), NamespaceTag(e.JudgedNamespace())}
	if e.UID != "" {
		tags = append(tags, TagUID+e.UID)
	}
	if !e.OrphanedSince.IsZero() {
		tags = append(tags, TagOrphanedSince+ceilSecond(e.OrphanedSince).Format(time.RFC3339))
		if !e.ReleaseAt.IsZero() {
			tags = append(tags, TagReleaseAt+ceilSecond(e.ReleaseAt).Format(time.RFC3339),
				TagReleaseFor+ceilSecond(e.OrphanedSince).Format(time.RFC3339))
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

// JudgedNamespace is the namespace the reservation was judged by, whose
// share it counts in: the namespace tag, or the Service's where there is
// none yet.
func (e Entry) JudgedNamespace() string {
	if e.Namespace != "" {
		return e.Namespace
	}
	return e.Service.Namespace
}

// Owns reports whether the entry belongs to cluster.
func (e Entry) Owns(cluster string) bool { return e.Cluster == cluster }

// ServiceTag is the tag that finds a Service's reservations with ListIPs.
func ServiceTag(svc types.NamespacedName) string { return TagService + svc.String() }

// NamespaceTag is the tag that finds a namespace's reservations with
// ListIPs.
func NamespaceTag(ns string) string { return TagNamespace + ns }

// Complete reports whether the entry holds every tag this version writes:
// the namespace tag, and with orphaned-since a release-at at or after it,
// written for it. The sweeper rewrites the others (see Retention.Settle).
func (e Entry) Complete() bool {
	return e.Namespace == e.JudgedNamespace() && (e.OrphanedSince.IsZero() || e.scheduled() && !e.untied)
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
