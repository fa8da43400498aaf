package ipam

import (
	"strings"
	"testing"
	"time"
)

// TestCheckedRetentionsLeaveAReuseWindow: every retention Check accepts
// lets an admission take a just-orphaned reservation back. A retention (or
// pending grace) equal to the margin leaves none: a Service deleted and
// created again at once would get a fresh address, with no error anywhere.
func TestCheckedRetentionsLeaveAReuseWindow(t *testing.T) {
	const margin = 20 * time.Second
	orphaned := time.Date(2026, 11, 22, 12, 0, 0, 900_000_000, time.UTC)
	for _, tc := range []struct {
		name      string
		retention time.Duration // of the pool
		grace     time.Duration // pending grace
		refused   string        // "" when accepted
	}{
		{"both longer", margin + 100*time.Millisecond, margin + 100*time.Millisecond, ""},
		{"no stickiness", 0, margin + 100*time.Millisecond, ""},
		{"retention equal to the margin", margin, time.Hour, "pools[0] (p).retention: 20s is not longer than the reuse safety margin 20s"},
		{"retention shorter", margin / 2, time.Hour, "pools[0] (p).retention: 10s is not longer than the reuse safety margin 20s"},
		{"grace equal to the margin", time.Hour, margin, "the pending grace 20s is not longer than the reuse safety margin 20s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Retention{PendingGrace: tc.grace, Margin: margin}
			cfg := &Config{Pools: []*Pool{{Name: "p", Retention: Duration{Duration: tc.retention, set: true}}}}
			err := r.Check(cfg)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Check: %v, want it refused: %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			// Accepted: right after orphaning, both a used and a pending
			// reservation of a sticky pool may be taken back, as the tag
			// tells it (whole seconds; the moment is late in one).
			just := orphaned.Add(time.Millisecond)
			used, _ := ParseEntry(Entry{Cluster: "c", Pool: "p", UID: "u", OrphanedSince: orphaned}.Tags())
			pending, _ := ParseEntry(Entry{Cluster: "c", Pool: "p", OrphanedSince: orphaned}.Tags())
			p := cfg.Pools[0]
			if got := r.Reusable(p, used, just); got != (tc.retention > 0) {
				t.Errorf("used reservation reusable %v, want %v", got, tc.retention > 0)
			}
			if !r.Reusable(p, pending, just) {
				t.Error("pending reservation not reusable right after orphaning")
			}
		})
	}
}
