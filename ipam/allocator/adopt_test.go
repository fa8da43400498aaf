package allocator

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// adoptEnv is two clusters on one emulator, the same pools but for their
// clusterName: blue, which holds reservations, and green, whose pool
// "ranged" adopts from the clusters named.
func adoptEnv(t *testing.T, greenRefs References, adoptFrom string) (e *env, blue, green *Allocator) {
	t.Helper()
	e = newEnv(t, "dc=172.16.32.0/22")
	file := func(cluster, extra string) string {
		return "clusterName: " + cluster + "\nregion: fr-par\nclusterPrivateNetworkID: {{nodes}}\npools:\n" +
			`  - {name: ranged, privateNetworkID: "{{dc}}", ranges: ["172.16.35.200-172.16.35.220"]` + extra + "}\n"
	}
	policy := ipam.Retention{PendingGrace: time.Hour, Margin: time.Minute}
	blue = newAllocator(Options{Cloud: e.Cloud, Config: e.Config(t, file("blue", "")), Retention: policy})
	green = newAllocator(Options{Cloud: e.Cloud, Config: e.Config(t, file("green", ", adoptFrom: ["+adoptFrom+"]")), References: greenRefs, Retention: policy})
	return e, blue, green
}

// retag rewrites an IP's ledger as a test step (another writer's).
func retag(t *testing.T, e *env, id string, edit func(*ipam.Entry)) {
	t.Helper()
	entry, _ := ipam.ParseEntry(mustIP(t, e, id).Tags)
	edit(&entry)
	if _, err := e.Cloud.SetTags(context.Background(), id, entry.Tags()); err != nil {
		t.Fatal(err)
	}
}

func TestReserveAdoptsFromAnotherCluster(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	api := svc("payments", "api")
	held := reserve(t, blue, "ranged", api)
	// Live in blue: used (uid back-filled) and attached to its Load
	// Balancer.
	retag(t, e, held.ID, func(en *ipam.Entry) { en.UID = "uid-blue" })
	if err := e.Srv.Attach(held.ID, emulator.Resource{Type: "lb_server", ID: "lb-blue", Name: "blue-api"}); err != nil {
		t.Fatal(err)
	}
	// Green's index is fresh (its booking listed the subnet) but holds
	// green's reservations only.
	if _, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: svc("payments", "web")}); err != nil {
		t.Fatal(err)
	}
	// Green has no Service of that name yet: admitted like a re-create
	// whose previous Load Balancer still holds the IP.
	got, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != held.ID || !got.Reused || got.Booked || got.AdoptedFrom != "blue" {
		t.Fatalf("adoption = %+v, want %s reused from blue", got, held.ID)
	}
	want := []string{"scw-lb-ipam", "scw-lb-ipam/cluster=green", "scw-lb-ipam/pool=ranged", "scw-lb-ipam/service=payments/api", "scw-lb-ipam/namespace=payments"}
	if tags := mustIP(t, e, held.ID).Tags; !ipam.SameTags(tags, want) {
		t.Fatalf("tags after adoption = %v, want %v (one write: cluster, pool, no uid, no orphaned-since)", tags, want)
	}
	// Green's own now: taken back as any of its reservations, without a
	// second adoption.
	again, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api})
	if err != nil || again.ID != held.ID || again.AdoptedFrom != "" {
		t.Fatalf("green's retry: %+v %v", again, err)
	}
	// Blue, which does not adopt from green, no longer sees it as its own.
	if err := e.Srv.Detach(held.ID); err != nil {
		t.Fatal(err)
	}
	fresh, err := blue.Reserve(ctx, ipam.Request{Pool: pool(t, blue, "ranged"), Service: api})
	if err != nil || fresh.ID == held.ID || !fresh.Booked {
		t.Fatalf("blue took green's reservation back: %+v %v", fresh, err)
	}
}

// adoptionCase is a reservation blue booked for payments/api, edited, and
// whether green, re-creating payments/api, adopts it.
type adoptionCase struct {
	name      string
	adoptFrom string
	// referenced: a Service of green references it (a
	// bring-your-own ID), so it is not this Service's to take.
	referenced bool
	edit       func(*ipam.Entry)
	adopted    bool
}

// adoptionCases are TestReserveAdoptsOnlyWhatThePoolAllows's, with times
// around now.
func adoptionCases(now time.Time) []adoptionCase {
	return []adoptionCase{
		{name: "retained, release far", adoptFrom: "blue", edit: func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-time.Hour), now.Add(23*time.Hour)
		}, adopted: true},
		{name: "pending, release far", adoptFrom: "blue", edit: func(en *ipam.Entry) {
			en.OrphanedSince, en.ReleaseAt = now.Add(-time.Minute), now.Add(9*time.Minute)
		}, adopted: true},
		// Within the margin of its release by blue's sweeper: never.
		{name: "retained, release within the margin", adoptFrom: "blue", edit: func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-24*time.Hour+30*time.Second), now.Add(30*time.Second)
		}},
		// Blue's retention is an hour, green's a day: blue's ledger says
		// when, not green's pool file.
		{name: "retained, blue's shorter retention within the margin", adoptFrom: "blue", edit: func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-time.Hour+30*time.Second), now.Add(30*time.Second)
		}},
		// Retained by an older version of blue: no release time to judge.
		{name: "retained without release-at", adoptFrom: "blue", edit: func(en *ipam.Entry) { en.UID, en.OrphanedSince = "u", now.Add(-time.Hour) }},
		{name: "live without release-at", adoptFrom: "blue", edit: func(en *ipam.Entry) { en.UID = "u" }, adopted: true},
		// A stale release time (before orphaned-since): nobody acts on it.
		{name: "retained with a stale release-at", adoptFrom: "blue", edit: func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-time.Hour), now.Add(-2*time.Hour)
		}},
		{name: "cluster not listed", adoptFrom: "red", edit: func(en *ipam.Entry) {}},
		{name: "another Service's", adoptFrom: "blue", edit: func(en *ipam.Entry) { en.Service = svc("payments", "web") }},
		{name: "referenced by another live Service", adoptFrom: "blue", referenced: true},
	}
}

func TestReserveAdoptsOnlyWhatThePoolAllows(t *testing.T) {
	ctx := context.Background()
	for _, tt := range adoptionCases(time.Now()) {
		t.Run(tt.name, func(t *testing.T) {
			r := refs{}
			e, blue, green := adoptEnv(t, r, tt.adoptFrom)
			api := svc("payments", "api")
			held := reserve(t, blue, "ranged", api)
			if tt.referenced {
				r[held.ID] = svc("payments", "other")
			}
			if tt.edit != nil {
				retag(t, e, held.ID, tt.edit)
			}
			before := mustIP(t, e, held.ID).Tags
			got, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api})
			if err != nil {
				t.Fatal(err)
			}
			if adopted := got.ID == held.ID; adopted != tt.adopted {
				t.Fatalf("adopted = %v, want %v (%+v)", adopted, tt.adopted, got)
			}
			if !tt.adopted && !ipam.SameTags(mustIP(t, e, held.ID).Tags, before) {
				t.Fatalf("blue's reservation was re-tagged: %v", mustIP(t, e, held.ID).Tags)
			}
		})
	}
}

// TestValidateIDAdoptsARestoredManifest: a manifest restored into green
// (Velero, kubectl get -o yaml | kubectl apply) carries blue's IPAM ID in
// private-ip-ids; the same Service's reservation in a pool that adopts
// from blue goes through adoption, as the CREATE without the annotation
// does, and one too close to blue's release gets a fresh address.
func TestValidateIDAdoptsARestoredManifest(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	for _, tt := range []struct {
		name    string
		edit    func(*ipam.Entry)
		adopted bool
		reason  ipam.Reason // of the refusal when not adopted
	}{
		{"live in blue", func(en *ipam.Entry) { en.UID = "uid-blue" }, true, ""},
		{"retained in blue, release far", func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-time.Hour), now.Add(time.Hour)
		}, true, ""},
		{"retained in blue, release within the margin", func(en *ipam.Entry) {
			en.UID, en.OrphanedSince, en.ReleaseAt = "u", now.Add(-time.Hour), now.Add(30*time.Second)
		}, false, ipam.ReasonReleasing},
		{"another Service's", func(en *ipam.Entry) { en.Service = svc("payments", "web") }, false, ipam.ReasonIDNotUsable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, blue, green := adoptEnv(t, nil, "blue")
			api := svc("payments", "api")
			held := reserve(t, blue, "ranged", api)
			retag(t, e, held.ID, tt.edit)
			got, err := green.ValidateID(ctx, ipam.IDRequest{ID: held.ID, Service: api})
			if !tt.adopted {
				if ipam.ReasonOf(err) != tt.reason {
					t.Fatalf("ValidateID = %+v, %v; want refused %s", got, err, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != held.ID || !got.Reused || got.AdoptedFrom != "blue" || got.BringYourOwn {
				t.Fatalf("ValidateID = %+v, want %s adopted from blue", got, held.ID)
			}
			if en, _ := ipam.ParseEntry(mustIP(t, e, held.ID).Tags); en.Cluster != "green" || !en.OrphanedSince.IsZero() || en.UID != "" {
				t.Fatalf("ledger after adoption: %+v", en)
			}
		})
	}
}

// TestReserveOwnBeforeAdopted: green's own retained reservation of the
// Service is taken back before blue's, which is older and live, and would
// win on every other rank.
func TestReserveOwnBeforeAdopted(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	api := svc("payments", "api")
	held := reserve(t, blue, "ranged", api)
	// Green books its own while blue's names another Service.
	retag(t, e, held.ID, func(en *ipam.Entry) { en.Service = svc("payments", "tmp") })
	own, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api})
	if err != nil || own.ID == held.ID {
		t.Fatalf("green's own booking: %+v %v", own, err)
	}
	retag(t, e, own.ID, func(en *ipam.Entry) { en.UID, en.OrphanedSince = "u-green", time.Now().Add(-time.Hour) })
	retag(t, e, held.ID, func(en *ipam.Entry) { en.Service, en.UID = api, "u-blue" })

	// A dry run says what it would take, and writes nothing.
	dry, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api, DryRun: true})
	if err != nil || dry.ID != own.ID || dry.AdoptedFrom != "" {
		t.Fatalf("dry run: %+v %v, want green's own %s", dry, err, own.ID)
	}
	got, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api})
	if err != nil || got.ID != own.ID || got.AdoptedFrom != "" {
		t.Fatalf("took %+v (%v), want green's own %s", got, err, own.ID)
	}
	if en, _ := ipam.ParseEntry(mustIP(t, e, held.ID).Tags); en.Cluster != "blue" {
		t.Fatalf("blue's reservation re-tagged: %+v", en)
	}
}

// TestReserveAdoptionDryRunWritesNothing: a dry run names the cluster it
// would adopt from; the tags stay blue's.
func TestReserveAdoptionDryRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	api := svc("payments", "api")
	held := reserve(t, blue, "ranged", api)
	before := mustIP(t, e, held.ID).Tags
	dry, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api, DryRun: true})
	if err != nil || dry.ID != held.ID || dry.AdoptedFrom != "blue" {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if after := mustIP(t, e, held.ID).Tags; !ipam.SameTags(after, before) {
		t.Fatalf("dry run wrote %v", after)
	}
}

// reserve books svc's address in pool of a.
func reserve(t *testing.T, a *Allocator, pool string, svc types.NamespacedName) *ipam.Grant {
	t.Helper()
	p, ok := a.Config().Pool(pool)
	if !ok {
		t.Fatalf("no pool %q", pool)
	}
	r, err := a.Reserve(context.Background(), ipam.Request{Pool: p, Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAdoptionInAPoolWithAShare: a share counts this cluster's
// reservations; blue's pending booking of the Service is adopted in a
// pool with one as in any other (the check for a lost booking taken back
// applies to this cluster's own).
func TestAdoptionInAPoolWithAShare(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	two := 2
	pool(t, green, "ranged").MaxPerNamespace = &two
	api := svc("payments", "api")
	held := reserve(t, blue, "ranged", api) // pending in blue: no uid yet
	got, err := green.Reserve(ctx, ipam.Request{Pool: pool(t, green, "ranged"), Service: api})
	if err != nil || got.ID != held.ID || got.AdoptedFrom != "blue" {
		t.Fatalf("green's CREATE: %+v %v; want %s adopted from blue", got, err, held.ID)
	}
	if en, _ := ipam.ParseEntry(mustIP(t, e, held.ID).Tags); en.Cluster != "green" || en.Namespace != "payments" {
		t.Fatalf("ledger after adoption: %+v", en)
	}
}

// TestValidateIDOfAReservationReleasedMeanwhile: a restored manifest
// names blue's reservation, which blue's sweeper releases between green's
// read and its write: the Service gets a fresh address from the pool, not
// the API's "not found".
func TestValidateIDOfAReservationReleasedMeanwhile(t *testing.T) {
	ctx := context.Background()
	e, blue, green := adoptEnv(t, nil, "blue")
	api := svc("payments", "api")
	held := reserve(t, blue, "ranged", api)
	cloud := releaseBeforeWrite{Cloud: e.Cloud, release: func() {
		if err := e.Cloud.ReleaseIP(ctx, held.ID); err != nil {
			t.Fatal(err)
		}
	}}
	g := newAllocator(Options{Cloud: cloud, Config: green.Config(), Retention: ipam.Retention{PendingGrace: time.Hour, Margin: time.Minute}})
	_, err := g.ValidateID(ctx, ipam.IDRequest{ID: held.ID, Service: api})
	var ie *ipam.Error
	if !errors.As(err, &ie) || ie.Reason != ipam.ReasonReleasing || ie.Fallback == nil || ie.Fallback.Name != "ranged" {
		t.Fatalf("ValidateID: %v; want ReservationReleasing with pool ranged to book anew in", err)
	}
}

// releaseBeforeWrite runs release before the first SetTags.
type releaseBeforeWrite struct {
	scaleway.Cloud
	release func()
}

func (c releaseBeforeWrite) SetTags(ctx context.Context, id string, tags []string) (*scaleway.IP, error) {
	c.release()
	return c.Cloud.SetTags(ctx, id, tags)
}
