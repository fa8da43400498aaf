package dns

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
)

// unattached: a CCM older than v0.36.0 ignores private-ip-ids and gives
// the Load Balancer DHCP addresses only, while external-dns publishes the
// name at the reserved address, the target the webhook wrote: the
// convergence monitor's Event says that DNS points at an address the CCM
// has not attached.
func (w *world) unattached(t *testing.T) {
	if err := w.CCM.RunOld(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.CCM.Restart(); err != nil {
			t.Error(err)
		}
	})
	w.create(t, api)
	addr := w.reserved(t, api)
	w.resolves(t, api, addr)
	want := fmt.Sprintf("DNS points at %s, which the CCM has not attached", addr)
	var notes []string
	deadline := convergenceGrace + syncWait
	for end := time.Now().Add(deadline); time.Now().Before(end); time.Sleep(poll) {
		notes = w.notApplied(t)
		if i := slices.IndexFunc(notes, func(n string) bool { return strings.Contains(n, want) }); i >= 0 {
			t.Logf("IPNotApplied: %s", notes[i])
			return
		}
	}
	t.Fatalf("no IPNotApplied Event of %s saying %q within %s; its IPNotApplied Events: %q", api, want, deadline, notes)
}

// notApplied are the notes of the IPNotApplied Events regarding the
// Service.
func (w *world) notApplied(t *testing.T) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := w.Kube.List(context.Background(), &list, client.InNamespace(api.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == sweeper.EventReasonIPNotApplied && e.Regarding.Kind == "Service" && e.Regarding.Name == api.Name {
			out = append(out, e.Note)
		}
	}
	return out
}
