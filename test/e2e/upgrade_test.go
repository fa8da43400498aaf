package e2e

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// The pools of the upgrade run: dc-link and general (on another network,
// as two pools of one Service must be) retain for 3 min, a share of 2 in
// shared, and a large pool for the load (not sticky).
const upgradePools = `    - {name: dc-link, privateNetworkID: {{dc}}, ranges: ["172.16.35.10-172.16.35.120"], retention: 3m}
    - {name: general, privateNetworkID: {{dc2}}, ranges: ["172.16.40.10-172.16.40.100"], retention: 3m}
    - {name: shared, privateNetworkID: {{dc}}, ranges: ["172.16.35.181-172.16.35.200"], maxPerNamespace: 2}
    - {name: load, privateNetworkID: {{dc}}, ranges: ["172.16.32.10-172.16.34.250"], retention: 0s}
`

// held is what a Service holds: its IDs and addresses as the webhook wrote
// them.
type held struct{ ids, addrs string }

// TestUpgradeFromPrevious (which replaces a rollout of one version to a
// changed value) installs the previous version (make previous:
// its chart and image, a ledger without release-at, release-for or the
// namespace tag), gives Services of every kind their addresses (a pool,
// an address, bring-your-own IDs, two pools, a share) and retains a
// deleted one's; then helm upgrade to this version, helm rollback and helm
// upgrade again, each under a stream of creates. After each: every
// Service keeps its IDs and addresses, nothing was released (the
// emulator's audit), not one create failed. Between the rollback and the
// second upgrade, the previous version takes the retained reservation back
// and retains it again, keeping the release-at this version wrote: the
// second upgrade must not read it as the release time (it would release
// the reservation early), and the Service's re-create must take its
// address back.
func TestUpgradeFromPrevious(t *testing.T) {
	ctx := context.Background()
	prevDir := filepath.Join(repoRoot, "bin", "previous")
	prevDigest, _, err := cluster.importLayout(filepath.Join(prevDir, "image"))
	if err != nil {
		t.Fatalf("importing the previous version's image (make previous): %v", err)
	}
	prevChart := filepath.Join(prevDir, "src", "charts", "scw-lb-ipam")
	in := installRelease(t, prevChart, prevDigest, upgradePools, "sweeper.interval=2s")
	byo, err := in.emu.AddIP(in.pns["dc"].ID, netip.MustParseAddr("172.16.35.230"), []string{"reserved-by-terraform"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]map[string]string{
		"by-pool":    {request.AnnotationPool: "dc-link"},
		"by-address": {request.AnnotationAddress: "172.16.35.100"},
		"byo":        {request.AnnotationIPAMIDs: byo},
		"two-pools":  {request.AnnotationPool: "dc-link,general"},
		"in-share":   {request.AnnotationPool: "shared"},
		"gone":       {request.AnnotationPool: "dc-link"},
	}
	kept := map[string]held{}
	for name, ann := range services {
		if err := cluster.kube.Create(ctx, fixtures.PrivateService(optedIn, name, ann)); err != nil {
			t.Fatalf("creating %s under the previous version: %v", name, err)
		}
		kept[name] = holding(t, name)
	}
	retained := kept["gone"]
	delete(kept, "gone")
	// Deleted once its uid is in the ledger: retained for the pool's
	// retention, not the pending grace.
	uidBackFilled(t, in.emu, retained.ids, "gone")
	deleteService(t, "gone")
	first := orphanedSince(t, in.emu, retained.ids, time.Time{})

	step := func(name string, args ...string) {
		t.Helper()
		stop := startLoadIn(t, strings.ReplaceAll(name, " ", "-"), "load", "172.16.32.", "172.16.33.", "172.16.34.")
		began := time.Now()
		if err := helmWatchingPods(t, append(args, "--namespace", namespace, "--wait", "--timeout", "3m")...); err != nil {
			stop()
			t.Fatalf("%s: %v\n%s", name, err, podReport(t))
		}
		eventually(t, 2*time.Minute, "two Ready pods, all of the "+name, func() bool {
			pods := releasePods(t)
			return len(pods) == 2 && len(readyPods(t)) == 2 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		})
		took := time.Since(began)
		time.Sleep(time.Second)
		created := stop()
		if want := int(took / (400 * time.Millisecond)); created < want {
			t.Fatalf("%s: only %d Services created in %s, want at least %d: the load did not cover the rollout", name, created, took, want)
		}
		checkKept(t, name, in.emu, kept, retained.ids)
		t.Logf("%s: %s; %d Services created meanwhile, 0 failed; %d kept their IDs and addresses, %s retained, nothing released",
			name, took.Round(100*time.Millisecond), created, len(kept), retained.ids)
	}
	upgrade := []string{"upgrade", release, chartDir(), "--values", in.values, "--set", "image.digest=" + cluster.digest, "--set", "sweeper.interval=2s"}
	step("upgrade", upgrade...)
	// This version back-fills what its ledger holds: the namespace tag on
	// every reservation, release-at and release-for on the retained one.
	written := backFilled(t, in.emu, retained.ids, first)
	// The upgrade installed the view's CRDs; the new leader shows every
	// reservation.
	viewShows(t, "upgrade", kept["by-pool"].ids, view.StateLive)
	viewShows(t, "upgrade", retained.ids, view.StateRetained)

	step("rollback", "rollback", release, "1")
	// The previous version has no view: its CRDs go, with their objects.
	eventually(t, time.Minute, "the rollback to remove the view's CRDs", func() bool {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		return apierrors.IsNotFound(cluster.kube.Get(ctx, client.ObjectKey{Name: "ipreservations.scw-lb-ipam.io"}, crd))
	})
	// The previous version takes the reservation back and retains it
	// again: orphaned-since anew, the release-at of the first retention
	// kept with the tags it does not know.
	if err := cluster.kube.Create(ctx, fixtures.PrivateService(optedIn, "gone", services["gone"])); err != nil {
		t.Fatalf("re-creating gone under the previous version: %v", err)
	}
	if got := holding(t, "gone"); got != retained {
		t.Fatalf("gone re-created under the previous version holds %v, want its retained %v", got, retained)
	}
	// Its sweeper back-fills the new uid: retained again, the reservation
	// keeps the pool's retention, not the pending grace.
	uidBackFilled(t, in.emu, retained.ids, "gone")
	deleteService(t, "gone")
	second := orphanedSince(t, in.emu, retained.ids, first)
	ip, _ := in.emu.IP(retained.ids)
	if slices.Contains(ip.Tags, ipam.TagReleaseAt+written.UTC().Format(time.RFC3339)) {
		t.Logf("the previous version kept the first retention's release-at %s when it took the reservation back: %v", written.Format(time.TimeOnly), ip.Tags)
	} else {
		t.Logf("the previous version dropped the first retention's release-at %s when it took the reservation back (it reads release-at as a brought-forward release): %v", written.Format(time.TimeOnly), ip.Tags)
	}

	step("upgrade again", upgrade...)
	viewShows(t, "upgrade again", kept["by-pool"].ids, view.StateLive)
	viewShows(t, "upgrade again", retained.ids, view.StateRetained)
	// The first retention's release-at is not this one's: the sweeper
	// writes a whole retention from the second orphaned-since.
	if at := backFilled(t, in.emu, retained.ids, second); !at.Equal(second.Add(3 * time.Minute)) {
		t.Fatalf("release-at after the second upgrade %s, want %s (orphaned-since %s + 3m)", at, second.Add(3*time.Minute), second)
	}
	if err := cluster.kube.Create(ctx, fixtures.PrivateService(optedIn, "gone", services["gone"])); err != nil {
		t.Fatalf("re-creating gone: %v", err)
	}
	if got := holding(t, "gone"); got != retained {
		t.Fatalf("gone re-created after the second upgrade holds %v, want its retained %v", got, retained)
	}
}

// viewShows waits until the IPReservation of IPAM ID id in optedIn shows
// state, after step.
func viewShows(t *testing.T, step, id, state string) {
	t.Helper()
	eventually(t, time.Minute, step+": IPReservation "+id+" "+state, func() bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(view.ReservationKind)
		if cluster.kube.Get(context.Background(), client.ObjectKey{Namespace: optedIn, Name: id}, u) != nil {
			return false
		}
		got, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return got == state
	})
}

// holding is what Service name holds once admitted.
func holding(t *testing.T, name string) held {
	t.Helper()
	svc := &corev1.Service{}
	if err := cluster.kube.Get(context.Background(), client.ObjectKey{Namespace: optedIn, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	h := held{ids: svc.Annotations[ccm.AnnotationPrivateIPIDs], addrs: svc.Annotations[request.AnnotationAddresses]}
	if h.ids == "" {
		t.Fatalf("%s admitted without its IDs: %v", name, svc.Annotations)
	}
	return h
}

func deleteService(t *testing.T, name string) {
	t.Helper()
	settled(t, optedIn)
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = optedIn, name
	if err := cluster.kube.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, name+" gone", func() bool {
		return apierrors.IsNotFound(cluster.kube.Get(context.Background(), client.ObjectKeyFromObject(svc), &corev1.Service{}))
	})
}

// orphanedSince waits for the sweeper to retain IP id after after, and
// returns its orphaned-since.
func orphanedSince(t *testing.T, emu *emulator.Server, id string, after time.Time) time.Time {
	t.Helper()
	var since time.Time
	eventually(t, time.Minute, id+" retained", func() bool {
		ip, ok := emu.IP(id)
		if !ok {
			t.Fatalf("%s released", id)
		}
		e, _ := ipam.ParseEntry(ip.Tags)
		since = e.OrphanedSince
		return since.After(after)
	})
	return since
}

// backFilled waits for this version's sweeper to write what its ledger
// holds on every reservation of the cluster (the namespace tag) and on the
// retained one (release-at and release-for, for the orphaned-since since),
// and returns its release-at.
func backFilled(t *testing.T, emu *emulator.Server, id string, since time.Time) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, time.Minute, "this version's tags on every reservation", func() bool {
		for _, ip := range emu.IPs() {
			e, ok := ipam.ParseEntry(ip.Tags)
			if !ok {
				continue
			}
			if !slices.Contains(ip.Tags, ipam.NamespaceTag(e.JudgedNamespace())) || !e.Complete() {
				return false
			}
			if ip.ID == id {
				if !e.OrphanedSince.Equal(since) || !slices.Contains(ip.Tags, ipam.TagReleaseFor+since.UTC().Format(time.RFC3339)) {
					return false
				}
				at = e.ReleaseAt
			}
		}
		return !at.IsZero()
	})
	return at
}

// checkKept fails the test when a Service changed what it holds or an IP
// it holds changed address, or when anything it holds, or the retained
// reservation, was released (the emulator's audit).
func checkKept(t *testing.T, step string, emu *emulator.Server, kept map[string]held, retained string) {
	t.Helper()
	ids := map[string]bool{retained: true}
	for name, want := range kept {
		if got := holding(t, name); got != want {
			t.Errorf("after the %s, %s holds %v, want %v", step, name, got, want)
		}
		for _, id := range strings.Split(want.ids, ",") {
			ids[id] = true
			ip, ok := emu.IP(id)
			if !ok {
				t.Errorf("after the %s, %s's IP %s is gone", step, name, id)
				continue
			}
			if want.addrs != "" && !slices.Contains(strings.Split(want.addrs, ","), ip.Address.IP.String()) {
				t.Errorf("after the %s, %s's IP %s has address %s, not one of %s", step, name, id, ip.Address.IP, want.addrs)
			}
		}
	}
	released := map[string]int{}
	for _, ev := range emu.Audit() {
		if ev.Kind == emulator.AuditRelease {
			released[ev.IPID]++
		}
	}
	for id, n := range released {
		if ids[id] || n > 1 {
			t.Errorf("after the %s, %s was released %d time(s)", step, id, n)
		}
	}
}

// uidBackFilled waits for the sweeper to write Service name's uid on IP id.
func uidBackFilled(t *testing.T, emu *emulator.Server, id, name string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := cluster.kube.Get(context.Background(), client.ObjectKey{Namespace: optedIn, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the uid of "+name+" on "+id, func() bool {
		ip, _ := emu.IP(id)
		return slices.Contains(ip.Tags, ipam.TagUID+string(svc.UID))
	})
}
