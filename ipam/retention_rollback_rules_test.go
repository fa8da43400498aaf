package ipam

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// previousVersion is what the previous version (783cd0d, which knows
// release-at only as a release a full pool brought forward) does to the
// tags this version wrote: its take-back clears orphaned-since and
// release-at and keeps the tags it does not know (release-for,
// early-release); its retention writes orphaned-since; its yield writes
// release-at alone.
type previousVersion []string

func (v previousVersion) takeBack() previousVersion {
	return slices.DeleteFunc(slices.Clone(v), func(t string) bool {
		return strings.HasPrefix(t, TagOrphanedSince) || strings.HasPrefix(t, TagReleaseAt)
	})
}

func (v previousVersion) retain(at time.Time) previousVersion {
	return append(slices.Clone(v), TagOrphanedSince+ceilSecond(at).Format(time.RFC3339))
}

func (v previousVersion) yield(at time.Time) previousVersion {
	return append(slices.Clone(v), TagReleaseAt+ceilSecond(at).Format(time.RFC3339))
}

func parsed(t *testing.T, tags []string) Entry {
	t.Helper()
	e, ok := ParseEntry(tags)
	if !ok {
		t.Fatalf("%v not parsed as ours", tags)
	}
	return e
}

// TestRollbackKeepsTheReleaseProtocol: after a rollback, the previous
// version takes back a reservation this version retained, retains it
// again and, its pool full, brings its release forward, keeping the
// release-for this version wrote. After the next upgrade this version must
// read that release as the previous version's leader does: no take-back
// inside its dead zone, the release when it is due, and the sweeper's
// rewrite keeps it early. A stale early-release tag, kept alone, is no
// early release.
func TestRollbackKeepsTheReleaseProtocol(t *testing.T) {
	cfg := rulesConfig(t)
	dc := rulesPool(t, cfg, "dc") // retention 1h
	first := rulesPolicy.Start(dc, Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}, rulesNow)
	again := rulesNow.Add(20 * time.Minute)
	yielded := again.Add(10 * time.Minute)
	due := ceilSecond(yielded.Add(rulesPolicy.Margin))
	tags := previousVersion(first.Tags()).takeBack().retain(again).yield(due)
	e := parsed(t, tags)
	if rulesPolicy.Reusable(dc, e, yielded.Add(time.Second)) {
		t.Errorf("taken back at %s, inside the dead zone of the previous version's release at %s", yielded.Add(time.Second).Format(time.TimeOnly), due.Format(time.TimeOnly))
	}
	if !rulesPolicy.Reusable(dc, e, yielded.Add(-rulesPolicy.Margin)) {
		t.Error("not taken back before the release was brought forward")
	}
	if !rulesPolicy.Expired(dc, e, due) {
		t.Errorf("not released at %s, when the previous version's leader releases it", due.Format(time.TimeOnly))
	}
	if e.Complete() {
		t.Fatal("read as complete: the sweeper would not tie it to this retention")
	}
	settled, changed := rulesPolicy.Settle(dc, e, yielded)
	back := parsed(t, settled.Tags())
	if !changed || !back.ReleaseAt.Equal(due) || !back.Early || !back.Complete() {
		t.Errorf("settled to release-at %s (early %v, complete %v), want %s, early", back.ReleaseAt.Format(time.TimeOnly), back.Early, back.Complete(), due.Format(time.TimeOnly))
	}

	// A release brought forward by this version, then taken back and
	// retained again by the previous one: early-release stays alone.
	early := rulesPolicy.Yield(first, rulesNow.Add(10*time.Minute))
	e = parsed(t, previousVersion(early.Tags()).takeBack().retain(again))
	if e.Early || !e.ReleaseAt.IsZero() {
		t.Fatalf("early-release kept alone reads as early %v, release-at %s", e.Early, e.ReleaseAt)
	}
	settled, _ = rulesPolicy.Settle(dc, e, again.Add(time.Second))
	if back := parsed(t, settled.Tags()); back.Early || !back.ReleaseAt.Equal(again.Add(time.Hour)) || !back.Complete() {
		t.Errorf("settled to release-at %s (early %v), want a whole retention after %s", back.ReleaseAt.Format(time.TimeOnly), back.Early, again.Format(time.TimeOnly))
	}
}
