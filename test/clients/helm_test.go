package clients

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// lbDeleteDelay is how long the late-deletion scenario's emulator keeps a
// deleted Load Balancer (to_delete, its IPs still attached): longer than
// client-go's retries of a 429 (10 at Retry-After 2 s, about 20 s), as
// Scaleway's deletions can be.
const lbDeleteDelay = 45 * time.Second

// atOnce bounds a helm install that no refusal held up: a 429 refused
// re-create that client-go retried would take 2 s per retry.
const atOnce = 15 * time.Second

// values are the chart's --set flags for the nodes' network and sets.
func (cp *controlPlane) values(sets ...string) []string {
	out := []string{"--set", "nodesPrivateNetworkID=" + cp.PNs["nodes"].ID}
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// testHelmUpgradeInstall: Helm 4 installs and upgrades with server-side
// apply, so each upgrade applies the chart's whole Service, pn-ids as the
// chart writes it included; uninstall --wait and install re-create it.
func testHelmUpgradeInstall(t *testing.T) {
	scenario(t, func(t *testing.T) {
		const rel = "helm-app"
		svc := client.ObjectKey{Namespace: namespace, Name: rel}
		values := s.values("pool=dc-link")
		succeed(t, s.helm, "helm", append([]string{"upgrade", "--install", rel, chartDir}, values...)...)
		st := s.firstAdmission(t, svc, s.PNs["dc"].ID, true)

		// An unrelated change: the port and a label.
		values = append(values, "--set", "port=8443", "--set", "labels.tier=gold")
		succeed(t, s.helm, "helm", append([]string{"upgrade", "--install", rel, chartDir}, values...)...)
		if cur := s.get(svc); cur == nil || len(cur.Spec.Ports) != 1 || cur.Spec.Ports[0].Port != 8443 || cur.Labels["tier"] != "gold" {
			t.Fatalf("helm upgrade did not apply the new port and label: %+v", cur)
		}
		s.reapplied(t, "helm upgrade --install --set port=8443,labels.tier=gold", st)

		// Without --wait, install would apply to the Service still
		// Terminating, which then disappears when the CCM removes its
		// finalizer (docs/usage.md warns about it).
		succeed(t, s.helm, "helm", "uninstall", rel, "--wait")
		succeed(t, s.helm, "helm", append([]string{"install", rel, chartDir}, values...)...)
		s.recreated(t, "helm uninstall --wait && helm install", st)
	})
}

// testLateLoadBalancerDeletion: Scaleway deletes a Load Balancer
// asynchronously and the CCM does not wait, so the re-created Service
// exists while the old Load Balancer still holds its address. helm
// uninstall --wait && helm install must succeed at once, and the new Load
// Balancer end on the old address once the old one is gone, for a pool
// Service and a bring-your-own one alike; then no other reservation of the
// cluster remains.
func testLateLoadBalancerDeletion(t *testing.T) {
	scenario(t, func(t *testing.T) {
		late, err := start(lbDeleteDelay)
		if err != nil {
			t.Fatal(err)
		}
		defer late.Stop()
		// Booked outside scw-lb-ipam (Terraform), without our tags.
		byo, err := late.Emu.AddIP(late.PNs["edge"].ID, netip.MustParseAddr("10.10.0.250"), []string{"reserved-by-terraform"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var pool *lbState
		var wg sync.WaitGroup
		wg.Go(func() {
			t.Run("Pool", func(t *testing.T) {
				scenario(t, func(t *testing.T) { pool = late.reinstall(t, "late-pool", "dc", true, "pool=dc-link") })
			})
		})
		wg.Go(func() {
			t.Run("BringYourOwn", func(t *testing.T) {
				scenario(t, func(t *testing.T) { late.reinstall(t, "late-byo", "edge", false, "ipamIDs="+byo) })
			})
		})
		wg.Wait()
		if pool == nil {
			return
		}
		// The sweeper releases what was booked on the way once its pending
		// grace is over.
		fixtures.EventuallySays(t, pendingGrace+20*time.Second, poll, "no reservation of cluster "+clusterName+" but "+pool.id, func() (bool, string) {
			var others []string
			for _, ip := range late.Emu.IPs() {
				if e, ok := ipam.ParseEntry(ip.Tags); ok && e.Owns(clusterName) && ip.ID != pool.id {
					others = append(others, ip.ID+" "+addressOf(ip)+" "+strings.Join(ip.Tags, ","))
				}
			}
			return len(others) == 0, strings.Join(others, "; ")
		})
		if ip, ok := late.Emu.IP(byo); !ok || slices.ContainsFunc(ip.Tags, func(tag string) bool { return strings.HasPrefix(tag, ipam.TagCluster) }) {
			t.Errorf("the bring-your-own IP %s: exists %v, tags %v; want it kept, without our tags", byo, ok, ip.Tags)
		}
	})
}

// reinstall installs release rel (its Service's reservation on network pn,
// from the chart values sets), then runs helm uninstall --wait && helm
// install while the emulator still deletes the old Load Balancer, and
// waits for the new one to be attached to the old address.
func (cp *controlPlane) reinstall(t *testing.T, rel, pn string, ledger bool, sets ...string) *lbState {
	values := cp.values(sets...)
	succeed(t, cp.helm, "helm", append([]string{"install", rel, chartDir}, values...)...)
	st := cp.firstAdmission(t, client.ObjectKey{Namespace: namespace, Name: rel}, cp.PNs[pn].ID, ledger)

	start := time.Now()
	succeed(t, cp.helm, "helm", "uninstall", rel, "--wait")
	uninstalled := time.Now()
	succeed(t, cp.helm, "helm", append([]string{"install", rel, chartDir}, values...)...)
	installed := time.Since(uninstalled)
	t.Logf("helm uninstall --wait took %s, helm install %s", uninstalled.Sub(start).Round(10*time.Millisecond), installed.Round(10*time.Millisecond))
	if installed > atOnce {
		t.Errorf("helm install took %s: the re-create was refused and retried", installed.Round(time.Second))
	}
	// Otherwise this scenario did not re-create during a late deletion.
	lbs := cp.Emu.LBs()
	if i := slices.IndexFunc(lbs, func(lb emulator.LB) bool { return lb.ID == st.lb }); i < 0 || lbs[i].Status != "to_delete" {
		t.Fatalf("the old Load Balancer %s was gone when helm install returned, %s after the uninstall: the scenario did not meet a late deletion", st.lb, time.Since(start).Round(time.Second))
	}
	return cp.recreated(t, "helm uninstall --wait && helm install", st)
}
