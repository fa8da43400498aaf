package ipam

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestEntryRoundTrip(t *testing.T) {
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	e := Entry{Cluster: "prod-par", Pool: "dc-link", Service: types.NamespacedName{Namespace: "payments", Name: "api"}, UID: "u-1", OrphanedSince: since, ReleaseAt: since.Add(time.Hour), Other: []string{"team=payments"}}
	tags := e.Tags()
	want := []string{"scw-lb-ipam", "scw-lb-ipam/cluster=prod-par", "scw-lb-ipam/pool=dc-link", "scw-lb-ipam/service=payments/api", "scw-lb-ipam/namespace=payments",
		"scw-lb-ipam/uid=u-1", "scw-lb-ipam/orphaned-since=2026-11-22T10:00:00Z", "scw-lb-ipam/release-at=2026-11-22T11:00:00Z",
		"scw-lb-ipam/release-for=2026-11-22T10:00:00Z", "team=payments"}
	if len(tags) != len(want) {
		t.Fatalf("tags = %v", tags)
	}
	for i := range want {
		if tags[i] != want[i] {
			t.Fatalf("tag %d = %q, want %q", i, tags[i], want[i])
		}
	}
	got, ok := ParseEntry(tags)
	if !ok || got.Cluster != e.Cluster || got.Pool != e.Pool || got.Service != e.Service || got.UID != e.UID || !got.OrphanedSince.Equal(since) ||
		!got.ReleaseAt.Equal(e.ReleaseAt) || got.Namespace != "payments" || !got.Complete() || len(got.Other) != 1 {
		t.Fatalf("round trip = %+v, %v", got, ok)
	}
}

func TestParseEntryForeign(t *testing.T) {
	for name, tags := range map[string][]string{
		"no tags":           nil,
		"cluster tag only":  {"scw-lb-ipam/cluster=prod"},
		"marker only":       {"scw-lb-ipam"},
		"someone else's":    {"terraform", "env=prod"},
		"service tag alone": {"scw-lb-ipam/service=a/b"},
	} {
		if _, ok := ParseEntry(tags); ok {
			t.Errorf("%s: parsed as ours", name)
		}
	}
}

func TestSameTags(t *testing.T) {
	if !SameTags([]string{"a", "b"}, []string{"b", "a"}) || SameTags([]string{"a"}, []string{"a", "b"}) || SameTags([]string{"a", "a"}, []string{"a", "b"}) {
		t.Fatal("SameTags is wrong")
	}
}
