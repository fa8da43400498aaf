package ipam

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// TestHandover: the retained reservations of blue, inside green's pools
// and outside the margin of their release, move to green in one write
// each; live ones, other clusters' and those about to be released stay.
func TestHandover(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	now := time.Now()
	book := func(a *Allocator, ns, name string, edit func(*Entry)) string {
		t.Helper()
		r, err := a.Reserve(ctx, Request{Pool: pool(t, a, "ranged"), Service: svc(ns, name)})
		if err != nil {
			t.Fatal(err)
		}
		retag(t, e, r.ID, edit)
		return r.ID
	}
	retained := func(en *Entry) { en.UID, en.OrphanedSince = "uid-"+en.Service.Name, now.Add(-time.Hour) }
	api := book(blue, "payments", "api", retained)
	web := book(blue, "shop", "web", retained)
	book(blue, "payments", "live", func(en *Entry) { en.UID = "uid-live" })
	closing := book(blue, "payments", "closing", func(en *Entry) { en.UID, en.OrphanedSince = "u", now.Add(-24*time.Hour+30*time.Second) })
	// Another cluster's, in the same pool: never read into a write.
	red := book(blue, "payments", "red", func(en *Entry) { en.Cluster, en.UID, en.OrphanedSince = "red", "u", now.Add(-time.Hour) })
	redTags := mustIP(t, e, red).Tags
	cfg, policy := green.Config(), Retention{PendingGrace: time.Hour, Margin: time.Minute}

	tagsBefore := map[string][]string{}
	for _, id := range []string{api, web, closing} {
		tagsBefore[id] = mustIP(t, e, id).Tags
	}
	dry, err := Handover(ctx, e.cloud, cfg, policy, HandoverRequest{From: "blue", DryRun: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := handedList(dry); got != fmt.Sprintf("%s payments/api ranged; %s shop/web ranged; %s payments/closing ranged skipped", api, web, closing) {
		t.Fatalf("dry run: %s", got)
	}
	for id, before := range tagsBefore {
		if !SameTags(mustIP(t, e, id).Tags, before) {
			t.Fatalf("the dry run wrote the tags of %s", id)
		}
	}

	moved, err := Handover(ctx, e.cloud, cfg, policy, HandoverRequest{From: "blue", Namespace: "payments", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := handedList(moved); got != fmt.Sprintf("%s payments/api ranged; %s payments/closing ranged skipped", api, closing) {
		t.Fatalf("handover of payments: %s", got)
	}
	want := Entry{Cluster: "green", Pool: "ranged", Service: svc("payments", "api"), UID: "uid-api", OrphanedSince: now}
	if got := mustIP(t, e, api).Tags; !SameTags(got, want.Tags()) {
		t.Fatalf("moved tags = %v, want %v", got, want.Tags())
	}
	for id, before := range map[string][]string{web: tagsBefore[web], closing: tagsBefore[closing], red: redTags} {
		if !SameTags(mustIP(t, e, id).Tags, before) {
			t.Fatalf("%s was re-tagged: %v", id, mustIP(t, e, id).Tags)
		}
	}
	if _, err := Handover(ctx, e.cloud, cfg, policy, HandoverRequest{From: "green", Now: now}); err == nil {
		t.Fatal("a handover from the pool file's own cluster was accepted")
	}
}

// TestHandoverRereadsBeforeWriting: a reservation blue's admission took
// back (or blue's sweeper changed) after the listing is left as it is.
func TestHandoverRereadsBeforeWriting(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	r, err := blue.Reserve(ctx, Request{Pool: pool(t, blue, "ranged"), Service: svc("payments", "api")})
	if err != nil {
		t.Fatal(err)
	}
	retag(t, e, r.ID, func(en *Entry) { en.UID, en.OrphanedSince = "u", time.Now().Add(-time.Hour) })
	// Blue takes it back between the listing and the re-read.
	cloud := rereadHook{Cloud: e.cloud, before: func() { retag(t, e, r.ID, func(en *Entry) { en.OrphanedSince = time.Time{} }) }}
	got, err := Handover(ctx, cloud, green.Config(), Retention{PendingGrace: time.Hour, Margin: time.Minute}, HandoverRequest{From: "blue", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Skipped == "" {
		t.Fatalf("handed %+v, want it skipped", got)
	}
	if en, _ := ParseEntry(mustIP(t, e, r.ID).Tags); en.Cluster != "blue" || !en.OrphanedSince.IsZero() {
		t.Fatalf("ledger after the handover: %+v, want blue's take-back", en)
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

func handedList(hs []Handed) string {
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
