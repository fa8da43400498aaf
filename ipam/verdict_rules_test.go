package ipam

import (
	"testing"
	"time"
)

// TestRetentionJudge is the sweeper's verdict on an unreferenced
// reservation, every branch: pool dc keeps 1h, the cycle starts at
// rulesNow and writes one second later.
func TestRetentionJudge(t *testing.T) {
	cfg := rulesConfig(t)
	dc, _ := cfg.Pool("dc")
	complete := Entry{Cluster: "prod", Pool: "dc", UID: "u1", Service: svcAPI, Namespace: svcAPI.Namespace}
	lacksNamespace := complete
	lacksNamespace.Namespace = ""
	untied := retained(complete, time.Minute, 10*time.Minute)
	untied.untied = true
	now := rulesNow.Add(time.Second)
	for _, tc := range []struct {
		name     string
		e        Entry
		pool     *Pool
		attached bool
		removed  bool // --release-removed-pools
		want     Verdict
		// releaseAt is next's release time, for a rewrite.
		releaseAt time.Time
	}{
		{name: "referenced until now: retention starts", e: complete, pool: dc, want: VerdictStart},
		{name: "retained, its time ahead", e: retained(complete, time.Minute, 59*time.Minute), pool: dc, want: VerdictRetain},
		{name: "retained by an older version, no release time: settled", e: retained(complete, time.Minute, 0), pool: dc, want: VerdictRewrite, releaseAt: rulesNow.Add(59 * time.Minute)},
		{name: "release time before orphaned-since (stale): this cluster's", e: retainedStale(complete), pool: dc, want: VerdictRewrite, releaseAt: rulesNow.Add(59 * time.Minute)},
		{name: "the pool file's retention grew: followed", e: retained(complete, time.Minute, 9*time.Minute), pool: dc, want: VerdictRewrite, releaseAt: rulesNow.Add(59 * time.Minute)},
		{name: "no namespace tag yet: written", e: retained(lacksNamespace, time.Minute, 59*time.Minute), pool: dc, want: VerdictRewrite, releaseAt: rulesNow.Add(59 * time.Minute)},
		{name: "another version's release time: tied to this one", e: untied, pool: dc, want: VerdictRewrite, releaseAt: rulesNow.Add(10 * time.Minute)},
		{name: "due at the cycle's start exactly", e: retained(complete, time.Hour, 0), pool: dc, want: VerdictRelease},
		{name: "due after the cycle started: next cycle", e: retained(complete, time.Hour-time.Second, time.Second), pool: dc, want: VerdictRetain},
		{name: "due, still attached", e: retained(complete, 2*time.Hour, -time.Hour), pool: dc, attached: true, want: VerdictAttached},
		{name: "due, its pool removed", e: retained(complete, 2*time.Hour, -time.Hour), want: VerdictRemovedPool},
		{name: "due, its pool removed, releasing those allowed", e: retained(complete, 2*time.Hour, -time.Hour), removed: true, want: VerdictRelease},
		{name: "pending (no uid), past the grace", e: retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, Namespace: svcAPI.Namespace}, 11*time.Minute, -time.Minute), pool: dc, want: VerdictRelease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, next := rulesPolicy.Judge(tc.pool, tc.e, tc.attached, tc.removed, rulesNow, now)
			if got != tc.want {
				t.Fatalf("verdict %s, want %s", got, tc.want)
			}
			switch {
			case got != VerdictRewrite && !sameEntry(next, tc.e):
				t.Errorf("a %s changed the entry: %+v, was %+v", got, next, tc.e)
			case got == VerdictRewrite && !next.ReleaseAt.Equal(tc.releaseAt):
				t.Errorf("rewrite to %+v: want it released at %s", next, tc.releaseAt)
			case got == VerdictRewrite && !written(next).Complete():
				t.Errorf("rewrite to %+v: its tags read back incomplete", next)
			}
		})
	}
}

// retainedStale is e retained a minute ago with a release time before
// that: a hand edit, or an older version's leftover.
func retainedStale(e Entry) Entry {
	e = retained(e, time.Minute, 0)
	e.ReleaseAt = e.OrphanedSince.Add(-time.Hour)
	return e
}

// written is e as its tags read back.
func written(e Entry) Entry {
	read, _ := ParseEntry(e.Tags())
	return read
}

func sameEntry(a, b Entry) bool { return SameTags(a.Tags(), b.Tags()) && a.untied == b.untied }
