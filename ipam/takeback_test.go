package ipam

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

func TestTakesBack(t *testing.T) {
	cfg := rulesConfig(t)
	web := types.NamespacedName{Namespace: "payments", Name: "web"}
	ours := Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}
	old := Entry{Cluster: "old", Pool: "dc", Service: svcAPI, UID: "u0"}
	attached := func(ip *scaleway.IP, typ string) *scaleway.IP {
		ip.Resource = &scaleway.Resource{Type: typ, ID: "r-1"}
		return ip
	}
	in := func(e Entry) *scaleway.IP { return ledgerIP("ip-1", subA, "172.16.4.15", e) }
	for _, tc := range []struct {
		name string
		pool string // "" is dc
		ip   *scaleway.IP
		own  []string
		refs []types.NamespacedName
		want bool
	}{
		{name: "ours, used by no other Service", ip: in(ours), want: true},
		{name: "not in the ledger", ip: &scaleway.IP{ID: "ip-1", SubnetID: subA, Address: netip.MustParseAddr("172.16.4.15"), Tags: []string{"terraform"}}},
		{name: "another Service's", ip: in(Entry{Cluster: "prod", Pool: "dc", Service: web})},
		{name: "on another subnet", ip: ledgerIP("ip-1", subB, "172.16.4.15", ours)},
		{name: "outside the pool's ranges", ip: ledgerIP("ip-1", subA, "172.16.4.50", ours)},
		{name: "in a sibling pool's ranges", ip: ledgerIP("ip-1", subA, "172.16.4.105", ours)},
		{name: "another cluster not in adoptFrom", ip: in(Entry{Cluster: "other", Pool: "dc", Service: svcAPI})},
		{name: "adoptFrom cluster, live there", ip: in(old), want: true},
		{name: "adoptFrom cluster, release beyond the margin", ip: in(retained(old, time.Hour, time.Hour)), want: true},
		{name: "adoptFrom cluster, retained without release-at", ip: in(retained(old, time.Minute, 0))},
		{name: "adoptFrom cluster, release within the margin", ip: in(retained(old, time.Hour, 10*time.Second))},
		{name: "own ID in an UPDATE, though attached elsewhere and referenced", ip: attached(in(ours), "instance_server"), own: []string{"ip-1"}, refs: []types.NamespacedName{web}, want: true},
		{name: "own ID of an adopted one still checks references", ip: in(old), own: []string{"ip-1"}, refs: []types.NamespacedName{web}},
		{name: "referenced by another live Service", ip: in(ours), refs: []types.NamespacedName{web}},
		{name: "referenced by a namesake counts as free", ip: in(ours), refs: []types.NamespacedName{svcAPI}, want: true},
		{name: "attached to a Load Balancer", ip: attached(in(ours), scaleway.ResourceLoadBalancer), want: true},
		{name: "attached to something else", ip: attached(in(ours), "instance_server")},
		{name: "retained within the reuse window", ip: in(retained(ours, time.Minute, 59*time.Minute)), want: true},
		{name: "retained, release within the margin", ip: in(retained(ours, time.Hour, 20*time.Second))},
		{name: "retained, release past", ip: in(retained(ours, 2*time.Hour, -time.Minute))},
		{name: "pending, within the pending grace", ip: in(retained(Entry{Cluster: "prod", Pool: "dc", Service: svcAPI}, time.Minute, 9*time.Minute)), want: true},
		{name: "renamed pool: judged by the pool holding the address", ip: in(retained(Entry{Cluster: "prod", Pool: "dc-old", Service: svcAPI, UID: "u1"}, time.Minute, 59*time.Minute)), want: true},
		{name: "not sticky, live", pool: "general", ip: ledgerIP("ip-1", subB, "10.0.0.9", Entry{Cluster: "prod", Pool: "general", Service: svcAPI, UID: "u1"}), want: true},
		{name: "not sticky, retained", pool: "general", ip: ledgerIP("ip-1", subB, "10.0.0.9", retained(Entry{Cluster: "prod", Pool: "general", Service: svcAPI, UID: "u1"}, time.Minute, time.Hour))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := "dc"
			if tc.pool != "" {
				pool = tc.pool
			}
			got := rulesPolicy.TakesBack(cfg, rulesPool(t, cfg, pool), svcAPI, tc.own, Read(tc.ip, rulesNow), tc.refs, rulesNow)
			if got != tc.want {
				t.Errorf("TakesBack = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreference: each row's ip is to be taken back rather than than, and
// never the other way round.
func TestPreference(t *testing.T) {
	mk := func(id, cluster, uid string, orphaned, created time.Time) *scaleway.IP {
		e := Entry{Cluster: cluster, Pool: "dc", Service: svcAPI, UID: uid, OrphanedSince: orphaned}
		if !orphaned.IsZero() {
			e.ReleaseAt = orphaned.Add(time.Hour)
		}
		ip := ledgerIP(id, subA, "172.16.4.15", e)
		ip.CreatedAt = created
		return ip
	}
	var live time.Time
	early, late := rulesNow.Add(-2*time.Hour), rulesNow.Add(-time.Hour)
	shown := map[string]time.Time{"shown": late, "shown-early": early, "shown-late": late, "used-shown-early": early, "used-shown-late": late}
	for _, tc := range []struct {
		name     string
		ip, than *scaleway.IP
	}{
		{"ours, though pending, before an adopted used one", mk("pending", "prod", "", live, early), mk("adopted", "old", "u0", live, early)},
		{"used before shown", mk("used", "prod", "u1", late, late), mk("shown", "prod", "", late, early)},
		{"shown before pending", mk("shown", "prod", "", late, late), mk("pending", "prod", "", late, early)},
		{"used before pending, though booked later", mk("used", "prod", "u1", late, late), mk("pending", "prod", "", late, early)},
		{"latest shown among used", mk("used-shown-late", "prod", "u1", early, late), mk("used-shown-early", "prod", "u1", late, early)},
		{"latest shown among shown", mk("shown-late", "prod", "", early, late), mk("shown-early", "prod", "", late, early)},
		{"among used, the one still live before one given up", mk("used-a", "prod", "u1", live, late), mk("used-b", "prod", "u1", late, early)},
		{"among used, the last given up", mk("used-a", "prod", "u1", late, late), mk("used-b", "prod", "u1", early, early)},
		{"among pending, the oldest booking", mk("pending-a", "prod", "", late, early), mk("pending-b", "prod", "", early, late)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			better := Preference("prod", shown)
			ip, than := Read(tc.ip, rulesNow), Read(tc.than, rulesNow)
			if !better(ip, than) {
				t.Errorf("%s is not preferred to %s", tc.ip.ID, tc.than.ID)
			}
			if better(than, ip) {
				t.Errorf("%s is also preferred to %s", tc.than.ID, tc.ip.ID)
			}
		})
	}
}

func TestReusableIn(t *testing.T) {
	cfg := rulesConfig(t)
	used := Entry{Cluster: "prod", Pool: "dc", Service: svcAPI, UID: "u1"}
	renamed := used
	renamed.Pool = "dc-old"
	for _, tc := range []struct {
		name   string
		e      Entry
		subnet string
		addr   string
		want   bool
	}{
		{"live in a removed pool", Entry{Cluster: "prod", Pool: "gone", Service: svcAPI, UID: "u1"}, subA, "172.16.4.50", true},
		{"retained in its pool, within the window", retained(used, time.Minute, 59*time.Minute), subA, "172.16.4.15", true},
		{"retained in its pool, within the margin", retained(used, time.Hour, 20*time.Second), subA, "172.16.4.15", false},
		{"renamed pool: the pool holding the address", retained(renamed, time.Minute, 59*time.Minute), subA, "172.16.4.15", true},
		{"renamed into a non-sticky pool's space", retained(renamed, time.Minute, 59*time.Minute), subB, "10.0.0.9", false},
		{"removed pool: never handed out again", retained(renamed, time.Minute, 59*time.Minute), subA, "172.16.4.50", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rulesPolicy.ReusableIn(cfg, tc.e, tc.subnet, netip.MustParseAddr(tc.addr), rulesNow); got != tc.want {
				t.Errorf("ReusableIn = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHeldByPrevious: a re-create whose reservation a Load Balancer still
// holds is refused as existing while its live namesake references it,
// retryably while that namesake is Terminating, and let through once it
// is gone.
func TestHeldByPrevious(t *testing.T) {
	ip := Read(ledgerIP("ip-1", subA, "172.16.4.15", Entry{Cluster: "prod", Pool: "dc", Service: svcAPI}), rulesNow)
	other := types.NamespacedName{Namespace: "payments", Name: "web"}
	for _, tc := range []struct {
		name   string
		refs   []types.NamespacedName
		exists bool
		want   Reason // "" for none
	}{
		{"the live namesake references it", []types.NamespacedName{svcAPI}, true, ReasonServiceExists},
		{"the namesake is Terminating", nil, true, ReasonStillHeld},
		{"another Service references it, the namesake is gone", []types.NamespacedName{other}, false, ""},
		{"the namesake is gone", nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HeldByPrevious(svcAPI, ip, tc.refs, tc.exists)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("refused: %s", got.Message)
			case tc.want != "" && (got == nil || got.Reason != tc.want):
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
}
