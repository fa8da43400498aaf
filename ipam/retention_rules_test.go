package ipam

import (
	"testing"
	"time"
)

// The retention rules over pool dc (retention 1h), general (0) and a
// removed pool (nil), with a 20 s margin and a 10 min pending grace.

func TestRetentionOf(t *testing.T) {
	cfg := rulesConfig(t)
	for _, tc := range []struct {
		name string
		pool string // "" for a removed pool
		uid  string
		want time.Duration
	}{
		{"used, its pool's retention", "dc", "u1", time.Hour},
		{"used, a pool that is not sticky", "general", "u1", 0},
		{"used, a removed pool", "", "u1", DefaultRetention},
		{"pending: the pending grace", "dc", "", 10 * time.Minute},
		{"pending in a pool that is not sticky", "general", "", 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := cfg.Pool(tc.pool)
			if got := rulesPolicy.Of(p, Entry{UID: tc.uid}); got != tc.want {
				t.Errorf("Of = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRetentionStart(t *testing.T) {
	cfg := rulesConfig(t)
	dc, general := rulesPool(t, cfg, "dc"), rulesPool(t, cfg, "general")
	late := rulesNow.Add(300 * time.Millisecond)
	for _, tc := range []struct {
		name      string
		p         *Pool
		e         Entry
		now       time.Time
		since, at time.Time
	}{
		{"used, its pool's retention", dc, Entry{UID: "u1"}, rulesNow, rulesNow, rulesNow.Add(time.Hour)},
		{"a part of a second rounds up", dc, Entry{UID: "u1"}, late, rulesNow.Add(time.Second), rulesNow.Add(time.Hour + time.Second)},
		{"pending: the pending grace", dc, Entry{}, rulesNow, rulesNow, rulesNow.Add(10 * time.Minute)},
		{"not sticky: released at once", general, Entry{UID: "u1"}, rulesNow, rulesNow, rulesNow},
		{"an early release is forgotten", dc, Entry{UID: "u1", Early: true, ReleaseAt: rulesNow}, rulesNow, rulesNow, rulesNow.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rulesPolicy.Start(tc.p, tc.e, tc.now)
			if !got.OrphanedSince.Equal(tc.since) || !got.ReleaseAt.Equal(tc.at) || got.Early {
				t.Errorf("Start = since %s, release %s, early %v; want %s, %s, false", got.OrphanedSince, got.ReleaseAt, got.Early, tc.since, tc.at)
			}
		})
	}
}

func TestRetentionFollow(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	used := Entry{UID: "u1"}
	early := retained(used, time.Hour, 10*time.Hour)
	early.Early = true
	for _, tc := range []struct {
		name string
		e    Entry
		want time.Time // zero: unchanged
	}{
		{"not retained", used, time.Time{}},
		{"no release-at yet", retained(used, time.Minute, 0), time.Time{}},
		{"stale release-at", retained(used, time.Minute, -2*time.Minute), time.Time{}},
		{"brought forward by a full pool", early, time.Time{}},
		{"already the pool's retention", retained(used, 10*time.Minute, 50*time.Minute), time.Time{}},
		{"retention grew: later", retained(used, 10*time.Minute, 5*time.Minute), rulesNow.Add(50 * time.Minute)},
		{"retention shrank: earlier", retained(used, 10*time.Minute, 10*time.Hour), rulesNow.Add(50 * time.Minute)},
		{"shrank into the margin: margin from now", retained(used, 2*time.Hour, 10*time.Hour), rulesNow.Add(20 * time.Second)},
		{"already within the margin: never later", retained(used, 2*time.Hour, 10*time.Second), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := rulesPolicy.Follow(dc, tc.e, rulesNow)
			if changed != !tc.want.IsZero() {
				t.Fatalf("changed %v (release %s), want %v", changed, got.ReleaseAt, !tc.want.IsZero())
			}
			if changed && !got.ReleaseAt.Equal(tc.want) {
				t.Errorf("release %s, want %s", got.ReleaseAt, tc.want)
			}
			if !changed && !got.ReleaseAt.Equal(tc.e.ReleaseAt) {
				t.Errorf("unchanged, but release %s, was %s", got.ReleaseAt, tc.e.ReleaseAt)
			}
		})
	}
}

func TestRetentionWhen(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	used := Entry{UID: "u1"}
	for _, tc := range []struct {
		name string
		e    Entry
		at   time.Time
		ok   bool
	}{
		{"not retained", used, time.Time{}, false},
		{"its release-at", retained(used, time.Hour, time.Minute), rulesNow.Add(time.Minute), true},
		{"no release-at: from the pool's retention", retained(used, 10*time.Minute, 0), rulesNow.Add(50 * time.Minute), true},
		{"no release-at, pending: from the pending grace", retained(Entry{}, time.Minute, 0), rulesNow.Add(9 * time.Minute), true},
		{"stale release-at: nothing to act on", retained(used, time.Minute, -2*time.Minute), rulesNow.Add(-2 * time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := rulesPolicy.When(dc, tc.e)
			if ok != tc.ok || !at.Equal(tc.at) {
				t.Errorf("When = %s, %v; want %s, %v", at, ok, tc.at, tc.ok)
			}
		})
	}
}

func TestRetentionSettle(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	used := Entry{UID: "u1"}
	for _, tc := range []struct {
		name string
		e    Entry
		want time.Time // zero: unchanged
	}{
		{"not retained", used, time.Time{}},
		{"already scheduled", retained(used, time.Minute, time.Minute), time.Time{}},
		{"an older version's: the time already computed", retained(used, 10*time.Minute, 0), rulesNow.Add(50 * time.Minute)},
		{"an older version's, past due: due", retained(used, 2*time.Hour, 0), rulesNow.Add(-time.Hour)},
		{"stale: the computed time", retained(used, 10*time.Minute, -20*time.Minute), rulesNow.Add(50 * time.Minute)},
		{"stale and past due: margin from now", retained(used, 2*time.Hour, -3*time.Hour), rulesNow.Add(20 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := rulesPolicy.Settle(dc, tc.e, rulesNow)
			if changed != !tc.want.IsZero() || changed && !got.ReleaseAt.Equal(tc.want) {
				t.Errorf("Settle = %s, %v; want %s", got.ReleaseAt, changed, tc.want)
			}
		})
	}
}
