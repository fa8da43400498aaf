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
		default:
			e.Other = append(e.Other, t)
		}
	}
	return e, marker && e.Cluster != ""
}

// Tags renders the entry, ours first in a fixed order, then the foreign tags.
func (e Entry) Tags() []string {
	tags := []string{TagMarker, TagCluster + e.Cluster, TagPool + e.Pool, TagService + e.Service.String()}
	if e.UID != "" {
		tags = append(tags, TagUID+e.UID)
	}
	if !e.OrphanedSince.IsZero() {
		tags = append(tags, TagOrphanedSince+ceilSecond(e.OrphanedSince).Format(time.RFC3339))
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
