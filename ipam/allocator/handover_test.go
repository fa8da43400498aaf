package allocator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// handoverIDs are the reservations blue holds in TestHandover.
type handoverIDs struct{ api, web, closing, old, red string }

// bookForHandover books blue's reservations of TestHandover in its pool
// "ranged" and tags each as the case needs, at now.
func bookForHandover(t *testing.T, e *env, blue *Allocator, now time.Time) handoverIDs {
	t.Helper()
	ctx := context.Background()
	book := func(a *Allocator, ns, name string, edit func(*ipam.Entry)) string {
		t.Helper()
		r, err := a.Reserve(ctx, ipam.Request{Pool: pool(t, a, "ranged"), Service: svc(ns, name)})
		if err != nil {
			t.Fatal(err)
		}
		retag(t, e, r.ID, edit)
		return r.ID
	}
	// Blue's ledger says when it releases each: a day after orphaned-since
	// (blue's retention), whatever green's pool file says.
	retained := func(en *ipam.Entry) {
		en.UID, en.OrphanedSince, en.ReleaseAt = "uid-"+en.Service.Name, now.Add(-time.Hour), now.Add(23*time.Hour)
	}
	api := book(blue, "payments", "api", retained)
	web := book(blue, "shop", "web", retained)
	book(blue, "payments", "live", func(en *ipam.Entry) { en.UID = "uid-live" })
	closing := book(blue, "payments", "closing", func(en *ipam.Entry) {
		en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-24*time.Hour+30*time.Second), now.Add(30*time.Second)
	})
	// Retained by an older version of blue (no release-at): green cannot
	// tell when blue releases it.
	old := book(blue, "payments", "old", func(en *ipam.Entry) { en.UID, en.OrphanedSince = "u", now.Add(-time.Hour) })
	// Another cluster's, in the same pool: never read into a write.
	red := book(blue, "payments", "red", func(en *ipam.Entry) { en.Cluster, en.UID, en.OrphanedSince = "red", "u", now.Add(-time.Hour) })
	return handoverIDs{api, web, closing, old, red}
}

// TestHandover: the retained reservations of blue, inside green's pools
// and outside the margin of their release, move to green in one write
// each; live ones, other clusters' and those about to be released stay.
func TestHandover(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	now := time.Now()
	ids := bookForHandover(t, e, blue, now)
	api, web, closing, old, red := ids.api, ids.web, ids.closing, ids.old, ids.red
	redTags := mustIP(t, e, red).Tags
	cfg, policy := green.Config(), ipam.Retention{PendingGrace: time.Hour, Margin: time.Minute}

	tagsBefore := map[string][]string{}
	for _, id := range []string{api, web, closing, old} {
		tagsBefore[id] = mustIP(t, e, id).Tags
	}
	dry, err := Handover(ctx, e.Cloud, cfg, policy, ipam.HandoverRequest{From: "blue", DryRun: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got := handedList(dry); got != fmt.Sprintf("%s payments/api ranged; %s shop/web ranged; %s payments/closing ranged skipped; %s payments/old ranged skipped", api, web, closing, old) {
		t.Fatalf("dry run: %s", got)
	}
	for id, before := range tagsBefore {
		if !ipam.SameTags(mustIP(t, e, id).Tags, before) {
			t.Fatalf("the dry run wrote the tags of %s", id)
		}
	}

	moved, err := Handover(ctx, e.Cloud, cfg, policy, ipam.HandoverRequest{From: "blue", Namespace: "payments", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got := handedList(moved); got != fmt.Sprintf("%s payments/api ranged; %s payments/closing ranged skipped; %s payments/old ranged skipped", api, closing, old) {
		t.Fatalf("handover of payments: %s", got)
	}
	// Green's retention from the move, written in green's ledger.
	want := ipam.Entry{Cluster: "green", Pool: "ranged", Service: svc("payments", "api"), UID: "uid-api", OrphanedSince: now,
		ReleaseAt: now.Add(pool(t, green, "ranged").Retention.Duration)}
	if got := mustIP(t, e, api).Tags; !ipam.SameTags(got, want.Tags()) {
		t.Fatalf("moved tags = %v, want %v", got, want.Tags())
	}
	for id, before := range map[string][]string{web: tagsBefore[web], closing: tagsBefore[closing], old: tagsBefore[old], red: redTags} {
		if !ipam.SameTags(mustIP(t, e, id).Tags, before) {
			t.Fatalf("%s was re-tagged: %v", id, mustIP(t, e, id).Tags)
		}
	}
	if _, err := Handover(ctx, e.Cloud, cfg, policy, ipam.HandoverRequest{From: "green"}); err == nil {
		t.Fatal("a handover from the pool file's own cluster was accepted")
	}
}

// TestHandoverRereadsBeforeWriting: a reservation blue's admission took
// back (or blue's sweeper changed) after the listing is left as it is.
func TestHandoverRereadsBeforeWriting(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	r, err := blue.Reserve(ctx, ipam.Request{Pool: pool(t, blue, "ranged"), Service: svc("payments", "api")})
	if err != nil {
		t.Fatal(err)
	}
	retag(t, e, r.ID, func(en *ipam.Entry) {
		en.UID, en.OrphanedSince, en.ReleaseAt = "u", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	})
	// Blue takes it back between the listing and the re-read.
	cloud := rereadHook{Cloud: e.Cloud, before: func() { retag(t, e, r.ID, func(en *ipam.Entry) { en.OrphanedSince = time.Time{} }) }}
	got, err := Handover(ctx, cloud, green.Config(), ipam.Retention{PendingGrace: time.Hour, Margin: time.Minute}, ipam.HandoverRequest{From: "blue"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Skipped == "" {
		t.Fatalf("handed %+v, want it skipped", got)
	}
	if en, _ := ipam.ParseEntry(mustIP(t, e, r.ID).Tags); en.Cluster != "blue" || !en.OrphanedSince.IsZero() {
		t.Fatalf("ledger after the handover: %+v, want blue's take-back", en)
	}
}

// TestHandoverReadsTheClockBeforeEachWrite: a run lasts as long as its
// calls; a reservation whose release came within the margin while the run
// went through the others is left, as blue's sweeper may be releasing it.
// Each move's retention starts at its own write.
func TestHandoverReadsTheClockBeforeEachWrite(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	start := time.Now().Truncate(time.Second)
	var ids []string
	for i, name := range []string{"a", "b", "c"} {
		r, err := blue.Reserve(ctx, ipam.Request{Pool: pool(t, blue, "ranged"), Service: svc("payments", name)})
		if err != nil {
			t.Fatal(err)
		}
		// Released by blue 3, 4 and 5 minutes after the run starts.
		retag(t, e, r.ID, func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", start.Add(-time.Hour), start.Add(time.Duration(3+i)*time.Minute)
		})
		ids = append(ids, r.ID)
	}
	// Each read of the clock is a minute later: the run's writes come
	// at 2, 4 and 6 minutes (the listing's judgement reads it too).
	now := start
	clock := func() time.Time { now = now.Add(time.Minute); return now }
	policy := ipam.Retention{PendingGrace: time.Hour, Margin: 30 * time.Second}
	got, err := Handover(ctx, e.Cloud, green.Config(), policy, ipam.HandoverRequest{From: "blue", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("handed %+v", got)
	}
	// a's release (3 min) was more than the margin away at its write (2
	// min); b's (4 min) not at its write (4 min), c's (5 min) not at 6.
	if got[0].Skipped != "" || got[1].Skipped == "" || got[2].Skipped == "" {
		t.Fatalf("handed %+v, want a moved, b and c left", got)
	}
	for i, h := range got {
		en, _ := ipam.ParseEntry(mustIP(t, e, ids[i]).Tags)
		moved := h.Skipped == ""
		if moved != (en.Cluster == "green") {
			t.Fatalf("%s reported %+v, ledger %+v", ids[i], h, en)
		}
		if moved && en.ReleaseAt.Before(en.OrphanedSince.Add(pool(t, green, "ranged").Retention.Duration)) {
			t.Fatalf("%s moved with %+v: not green's retention from its write", ids[i], en)
		}
		if !moved && h.Skipped != "its release by cluster blue is due within the safety margin" {
			t.Fatalf("%s skipped: %q", ids[i], h.Skipped)
		}
	}
}

// rereadHook runs before before each GetIP.
type rereadHook struct {
	scaleway.Cloud
	before func()
}

func (c rereadHook) GetIP(ctx context.Context, id string) (*scaleway.IP, error) {
	c.before()
	return c.Cloud.GetIP(ctx, id)
}

func handedList(hs []ipam.Handed) string {
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s %s %s", h.ID, h.Service, h.Pool)
		if h.Skipped != "" {
			s += " skipped"
		}
	}
	return s
}
