package ipam

import (
	"testing"
	"time"
)

// verdictRow is a retained (or live) entry and what each verdict at
// rulesNow says of it in pool dc.
type verdictRow struct {
	name string
	e    Entry
	pool string // "" is dc; "removed" is nil
	want bool
}

func runVerdicts(t *testing.T, verdict func(*Pool, Entry, time.Time) bool, rows []verdictRow) {
	t.Helper()
	cfg := rulesConfig(t)
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.pool
			if name == "" {
				name = "dc"
			}
			p, _ := cfg.Pool(name)
			if got := verdict(p, tc.e, rulesNow); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

var usedEntry = Entry{UID: "u1"}

func TestRetentionReusable(t *testing.T) {
	runVerdicts(t, rulesPolicy.Reusable, []verdictRow{
		{"live, even in a removed pool", usedEntry, "removed", true},
		{"release beyond the margin", retained(usedEntry, time.Minute, 21*time.Second), "", true},
		{"release at the margin exactly", retained(usedEntry, time.Minute, 20*time.Second), "", false},
		{"release past", retained(usedEntry, time.Hour, -time.Second), "", false},
		{"no release-at: the pool's retention", retained(usedEntry, 10*time.Minute, 0), "", true},
		{"stale release-at", retained(usedEntry, time.Minute, -2*time.Minute), "", false},
		{"removed pool", retained(usedEntry, time.Minute, time.Hour), "removed", false},
		{"not sticky, whatever the tag says", retained(usedEntry, time.Minute, time.Hour), "general", false},
		{"pending in a pool that is not sticky", retained(Entry{}, time.Minute, 9*time.Minute), "general", true},
	})
}

func TestRetentionAdoptable(t *testing.T) {
	runVerdicts(t, rulesPolicy.Adoptable, []verdictRow{
		{"live there, even in a removed pool", usedEntry, "removed", true},
		{"release beyond the margin", retained(usedEntry, time.Minute, 21*time.Second), "", true},
		{"release at the margin exactly", retained(usedEntry, time.Minute, 20*time.Second), "", false},
		{"no release-at: never while retained", retained(usedEntry, 10*time.Minute, 0), "", false},
		{"stale release-at", retained(usedEntry, time.Minute, -2*time.Minute), "", false},
		{"removed pool", retained(usedEntry, time.Minute, time.Hour), "removed", false},
		{"the tag alone: not sticky here", retained(usedEntry, time.Minute, time.Hour), "general", true},
	})
}

func TestRetentionYieldable(t *testing.T) {
	runVerdicts(t, rulesPolicy.Yieldable, []verdictRow{
		{"live", usedEntry, "", false},
		{"retained past the margin", retained(usedEntry, 20*time.Second, time.Hour), "", true},
		{"retained within the margin", retained(usedEntry, 19*time.Second, time.Hour), "", false},
		{"already in its dead zone", retained(usedEntry, time.Hour, 20*time.Second), "", false},
		{"stale release-at", retained(usedEntry, time.Hour, -2*time.Hour), "", false},
	})
}

func TestRetentionReleasing(t *testing.T) {
	runVerdicts(t, rulesPolicy.Releasing, []verdictRow{
		{"live", usedEntry, "", false},
		{"release beyond the margin", retained(usedEntry, time.Hour, 21*time.Second), "", false},
		{"release at the margin exactly", retained(usedEntry, time.Hour, 20*time.Second), "", true},
		{"release past", retained(usedEntry, time.Hour, -time.Second), "", true},
		{"stale release-at", retained(usedEntry, time.Hour, -2*time.Hour), "", false},
		{"no release-at, due within the margin", retained(usedEntry, time.Hour-10*time.Second, 0), "", true},
	})
}

func TestRetentionExpired(t *testing.T) {
	runVerdicts(t, rulesPolicy.Expired, []verdictRow{
		{"live", usedEntry, "", false},
		{"release ahead", retained(usedEntry, time.Hour, time.Second), "", false},
		{"release now: due", Entry{UID: "u1", OrphanedSince: rulesNow.Add(-time.Hour), ReleaseAt: rulesNow}, "", true},
		{"release past", retained(usedEntry, time.Hour, -time.Second), "", true},
		{"stale release-at", retained(usedEntry, time.Hour, -2*time.Hour), "", false},
		{"no release-at, past the pool's retention", retained(usedEntry, time.Hour, 0), "", true},
		{"no release-at, pending past the grace", retained(Entry{}, 10*time.Minute, 0), "", true},
	})
}

func TestRetentionYield(t *testing.T) {
	cfg := rulesConfig(t)
	dc := rulesPool(t, cfg, "dc")
	e := retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}, time.Hour, 10*time.Hour)
	got := rulesPolicy.Yield(e, rulesNow)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"release margin from now", got.ReleaseAt.Equal(rulesNow.Add(20 * time.Second))},
		{"marked early", got.Early},
		{"the rest of the ledger kept", got.OrphanedSince.Equal(e.OrphanedSince) && got.Service == svcAPI && got.UID == "u1"},
		{"in its dead zone at once", rulesPolicy.Releasing(dc, got, rulesNow) && !rulesPolicy.Reusable(dc, got, rulesNow)},
		{"the sweeper leaves it", !changedBy(rulesPolicy.Follow(dc, got, rulesNow))},
		{"released once the margin passed", rulesPolicy.Expired(dc, got, rulesNow.Add(20*time.Second))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("Yield = %+v", got)
			}
		})
	}
}

func changedBy(_ Entry, changed bool) bool { return changed }

func TestRetentionRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     time.Duration
	}{
		{"margin and a sweep", 30 * time.Second, 50 * time.Second},
		{"no interval: a minute", 0, 80 * time.Second},
		{"negative interval: a minute", -time.Second, 80 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Retention{Margin: 20 * time.Second, SweepInterval: tc.interval}
			if got := r.RetryAfter(); got != tc.want {
				t.Errorf("RetryAfter = %s, want %s", got, tc.want)
			}
		})
	}
}
