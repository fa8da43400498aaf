package ipam

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// olderVersionRetainsAgain is what a version older than release-at does to
// tags this version wrote: its take-back clears orphaned-since and keeps
// every tag it does not know (release-at, early-release…), and the retention
// it starts later writes orphaned-since alone.
func olderVersionRetainsAgain(tags []string, at time.Time) []string {
	tags = slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return strings.HasPrefix(t, TagOrphanedSince) })
	return append(tags, TagOrphanedSince+ceilSecond(at).Format(time.RFC3339))
}

// TestRollbackLeavesNoStaleRelease: retained here (release-at written),
// then, after a rollback, taken back and retained again by an older
// version, the reservation is released a whole retention after its second
// orphaned-since, not at the first one's release-at, early or brought
// forward; until then its Service's re-create takes it back.
func TestRollbackLeavesNoStaleRelease(t *testing.T) {
	cfg := rulesConfig(t)
	dc := rulesPool(t, cfg, "dc") // retention 1h
	first := Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}
	for _, tc := range []struct {
		name  string
		write func(Entry) Entry
	}{
		{"retained", func(e Entry) Entry { return rulesPolicy.Start(dc, e, rulesNow) }},
		{"retained, then brought forward by a full pool", func(e Entry) Entry {
			return rulesPolicy.Yield(rulesPolicy.Start(dc, e, rulesNow), rulesNow.Add(10*time.Minute))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			again := rulesNow.Add(20 * time.Minute)
			stale := tc.write(first).ReleaseAt
			e, ok := ParseEntry(olderVersionRetainsAgain(tc.write(first).Tags(), again))
			if !ok {
				t.Fatal("not parsed as ours")
			}
			due := again.Add(time.Hour)
			for _, now := range []time.Time{stale.Add(time.Second), due.Add(-rulesPolicy.Margin - time.Second)} {
				if rulesPolicy.Expired(dc, e, now) {
					t.Errorf("at %s, released: the release-at %s of the first retention is stale, the second ends at %s", now.Format(time.TimeOnly), stale.Format(time.TimeOnly), due.Format(time.TimeOnly))
				}
				if !rulesPolicy.Reusable(dc, e, now) {
					t.Errorf("at %s, its Service's re-create may not take it back", now.Format(time.TimeOnly))
				}
			}
			if !rulesPolicy.Expired(dc, e, due) {
				t.Errorf("not released at %s, a retention after the second orphaned-since", due.Format(time.TimeOnly))
			}
			// The sweeper writes the second retention's release-at: read
			// back, it is complete.
			if e.Complete() {
				t.Fatal("the stale release-at reads as complete: the sweeper would not rewrite it")
			}
			settled, changed := rulesPolicy.Settle(dc, e, stale.Add(time.Second))
			back, _ := ParseEntry(settled.Tags())
			if !changed || !back.ReleaseAt.Equal(due) || back.Early || !back.Complete() {
				t.Errorf("settled to release-at %s (early %v, complete %v), want %s", back.ReleaseAt, back.Early, back.Complete(), due)
			}
		})
	}
}
