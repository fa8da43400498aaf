package ipam

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// held is a reservation of cluster prod at 172.16.4.<host>, as a listing
// describes it.
func held(id string, host int, svc string, since, release time.Time) *Reservation {
	return &Reservation{IP: scaleway.IP{ID: id, Address: netip.AddrFrom4([4]byte{172, 16, 4, byte(host)})},
		Entry: Entry{Cluster: "prod", Service: types.NamespacedName{Namespace: "payments", Name: svc}, UID: "u-" + svc, OrphanedSince: since, ReleaseAt: release}}
}

// bucket names the part of hs holding id, "" for none.
func bucket(hs Holders, id string) string {
	for name, part := range map[string][]*Reservation{"live": hs.Live, "yieldable": hs.Yieldable, "releasing": hs.Releasing, "notYet": hs.NotYet, "settling": hs.Settling} {
		if slices.ContainsFunc(part, func(h *Reservation) bool { return h.ID == id }) {
			return name
		}
	}
	return ""
}

func TestClassify(t *testing.T) {
	cfg := rulesConfig(t)
	dc := rulesPool(t, cfg, "dc")
	var never time.Time
	long := rulesNow.Add(-time.Hour)
	attached := held("ip", 11, "a", long, rulesNow.Add(time.Hour))
	attached.Resource = &scaleway.Resource{Type: scaleway.ResourceLoadBalancer, ID: "lb-1"}
	other := held("ip", 11, "a", long, rulesNow.Add(time.Hour))
	other.Cluster = "old"
	for _, tc := range []struct {
		name       string
		h          *Reservation
		referenced bool
		want       string
	}{
		{"referenced by a live Service, though retained", held("ip", 11, "a", long, rulesNow.Add(time.Hour)), true, "live"},
		{"unreferenced, not retained yet", held("ip", 11, "a", never, never), false, "settling"},
		{"release within the margin", held("ip", 11, "a", long, rulesNow.Add(20*time.Second)), false, "releasing"},
		{"release past", held("ip", 11, "a", long, rulesNow.Add(-time.Second)), false, "releasing"},
		{"still attached to a Load Balancer", attached, false, "notYet"},
		{"retained within the margin", held("ip", 11, "a", rulesNow.Add(-10*time.Second), rulesNow.Add(time.Hour)), false, "notYet"},
		{"stale release time", held("ip", 11, "a", long, long.Add(-time.Second)), false, "notYet"},
		{"retained past the margin", held("ip", 11, "a", rulesNow.Add(-20*time.Second), rulesNow.Add(time.Hour)), false, "yieldable"},
		{"retained by an older version: the pool's retention", held("ip", 11, "a", rulesNow.Add(-30*time.Minute), never), false, "yieldable"},
		{"another cluster's", other, false, ""},
		{"no IPAM ID", held("", 11, "a", long, rulesNow.Add(time.Hour)), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := rulesPolicy.Classify("prod", dc, []*Reservation{tc.h}, map[string]bool{tc.h.ID: tc.referenced}, rulesNow)
			if got := bucket(hs, tc.h.ID); got != tc.want {
				t.Errorf("classified %q, want %q: %+v", got, tc.want, hs)
			}
		})
	}
}

// TestClassifyOrdersYieldable: the oldest retained yields first; the
// address breaks a tie.
func TestClassifyOrdersYieldable(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	release := rulesNow.Add(time.Hour)
	all := []*Reservation{
		held("new", 11, "a", rulesNow.Add(-time.Minute), release),
		held("tie-high", 14, "b", rulesNow.Add(-time.Hour), release),
		held("tie-low", 12, "c", rulesNow.Add(-time.Hour), release),
		held("oldest", 13, "d", rulesNow.Add(-2*time.Hour), release),
	}
	var got []string
	for _, h := range rulesPolicy.Classify("prod", dc, all, nil, rulesNow).Yieldable {
		got = append(got, h.ID)
	}
	if want := "oldest,tie-low,tie-high,new"; strings.Join(got, ",") != want {
		t.Errorf("Yieldable = %v, want %s", got, want)
	}
}

func TestUnsure(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	var never time.Time
	other := held("ip", 11, "a", never, never)
	other.Cluster = "old"
	for _, tc := range []struct {
		name       string
		h          *Reservation
		referenced bool
		want       bool
	}{
		{"unreferenced, not retained: the sweeper may have marked it", held("ip", 11, "a", never, never), false, true},
		{"referenced, not retained", held("ip", 11, "a", never, never), true, false},
		{"retained, release due", held("ip", 11, "a", rulesNow.Add(-time.Hour), rulesNow), false, true},
		{"retained, release not due", held("ip", 11, "a", rulesNow.Add(-time.Hour), rulesNow.Add(time.Second)), false, false},
		{"another cluster's", other, false, false},
		{"no IPAM ID", held("", 11, "a", never, never), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := rulesPolicy.Unsure("prod", dc, []*Reservation{tc.h}, map[string]bool{tc.h.ID: tc.referenced}, rulesNow); ok != tc.want || (ok && !reflect.DeepEqual(got, tc.h)) {
				t.Errorf("Unsure = %v (%v), want %v", got, ok, tc.want)
			}
		})
	}
}

// TestUnsureChoosesOne: of several, the one due first, then the lowest
// address: one re-read, the same on every replica.
func TestUnsureChoosesOne(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	var never time.Time
	unmarked := held("ip-a", 11, "a", never, never)
	dueLater := held("ip-b", 12, "b", rulesNow.Add(-time.Hour), rulesNow.Add(-time.Minute))
	dueFirst := held("ip-c", 13, "c", rulesNow.Add(-time.Hour), rulesNow.Add(-2*time.Minute))
	got, ok := rulesPolicy.Unsure("prod", dc, []*Reservation{unmarked, dueLater, dueFirst}, map[string]bool{}, rulesNow)
	if !ok || got.ID != "ip-c" {
		t.Errorf("Unsure = %v (%v), want ip-c, due first", got, ok)
	}
	got, ok = rulesPolicy.Unsure("prod", dc, []*Reservation{held("ip-d", 14, "d", never, never), unmarked}, map[string]bool{}, rulesNow)
	if !ok || got.ID != "ip-a" {
		t.Errorf("Unsure = %v (%v), want ip-a, the lowest address", got, ok)
	}
}

func TestPoolFullAndShareFull(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	hs := Holders{Live: []*Reservation{held("ip", 11, "a", time.Time{}, time.Time{})}}
	for _, tc := range []struct {
		name        string
		f           Full
		what, among string
	}{
		{"pool", rulesPolicy.PoolFull(dc, hs), `pool "dc" is full`, "of its 11 addresses"},
		{"share", rulesPolicy.ShareFull("payments", 3, 3, dc, hs), `namespace payments holds 3/3 addresses of pool "dc"`, "of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.f.What != tc.what || tc.f.Among != tc.among {
				t.Errorf("What, Among = %q, %q; want %q, %q", tc.f.What, tc.f.Among, tc.what, tc.among)
			}
			if tc.f.RetryAfter != 50*time.Second || tc.f.Margin != 20*time.Second || len(tc.f.Live) != 1 {
				t.Errorf("RetryAfter %s, Margin %s, Live %d; want 50s, 20s, 1", tc.f.RetryAfter, tc.f.Margin, len(tc.f.Live))
			}
		})
	}
}

// wantRefusal checks a refusal's reason, retry and words.
func wantRefusal(t *testing.T, err *Error, reason Reason, retryAfter time.Duration, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no refusal, want %s", reason)
	}
	if err.Reason != reason || err.RetryAfter != retryAfter {
		t.Errorf("refusal %s after %s, want %s after %s: %s", err.Reason, err.RetryAfter, reason, retryAfter, err.Message)
	}
	if want := reason == ReasonYielding; err.Retryable() != want {
		t.Errorf("Retryable = %v, want %v", err.Retryable(), want)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Message, f) {
			t.Errorf("message lacks %q:\n%s", f, err.Message)
		}
	}
}

func TestFullDecide(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	long, release := rulesNow.Add(-2*time.Hour), rulesNow.Add(time.Hour)
	oldest, younger := held("y1", 11, "a", long, release), held("y2", 12, "b", long.Add(time.Minute), release)
	rel, notYet := held("r", 13, "c", long, rulesNow.Add(time.Second)), held("n", 14, "d", rulesNow, release)
	settling, live := held("s", 15, "e", time.Time{}, time.Time{}), held("l", 16, "f", time.Time{}, time.Time{})
	var none time.Time
	for _, tc := range []struct {
		name      string
		hs        Holders
		dry       bool
		waiting   time.Time
		reason    Reason // "" for none
		retry     time.Duration
		yield     string // the yielded IPID, "" for none
		fragments []string
	}{
		{name: "every address in use", hs: Holders{Live: []*Reservation{live}}},
		{"settling only, dry run", Holders{Settling: []*Reservation{settling}, Live: []*Reservation{live}}, true, none, ReasonWouldYield, 0, "",
			[]string{`pool "dc" is full; 1 of its 11 addresses belong to no live Service and are not retained yet`, "a CREATE would be asked to retry in ~50 s", "nothing was changed (dry run)"}},
		{"settling only", Holders{Settling: []*Reservation{settling}}, false, none, ReasonYielding, 50 * time.Second, "",
			[]string{"1 of its 11 addresses belong to no live Service", "nothing was reserved, retry in ~50 s"}},
		{"yieldable, dry run", Holders{Yieldable: []*Reservation{oldest, younger}, Releasing: []*Reservation{rel}}, true, none, ReasonWouldYield, 0, "",
			[]string{"3 of its 11 addresses are retained for deleted Services", "release the oldest (172.16.4.11, of the deleted payments/a) early", "retried in ~50 s", "(dry run)"}},
		{"releasing, dry run", Holders{Releasing: []*Reservation{rel}}, true, none, ReasonWouldYield, 0, "",
			[]string{"1 of its 11 addresses are retained for deleted Services and being released", "retry in ~50 s", "(dry run)"}},
		{"waiting for a release brought forward", Holders{Yieldable: []*Reservation{oldest}}, false, rulesNow.Add(30 * time.Second), ReasonYielding, 30 * time.Second, "",
			[]string{"the oldest is being released for this Service", "retry in ~30 s"}},
		{"waiting for a release due already: a second", Holders{Yieldable: []*Reservation{oldest}}, false, rulesNow.Add(-5 * time.Second), ReasonYielding, time.Second, "",
			[]string{"the oldest is being released for this Service", "retry in ~1 s"}},
		{"none may yield yet, dry run", Holders{NotYet: []*Reservation{notYet}}, true, none, ReasonWouldYield, 0, "",
			[]string{"1 of its 11 addresses are retained for deleted Services, none of which may be released yet", "a CREATE would be asked to retry in ~50 s", "(dry run)"}},
		{"waiting, part of a second rounds up", Holders{NotYet: []*Reservation{notYet}}, false, rulesNow.Add(1500 * time.Millisecond), ReasonYielding, 1500 * time.Millisecond, "",
			[]string{"retry in ~2 s"}},
		{"yieldable: the oldest", Holders{Yieldable: []*Reservation{oldest, younger}, Settling: []*Reservation{settling}}, false, none, "", 0, "y1", nil},
		{"none may yield yet", Holders{NotYet: []*Reservation{notYet}, Settling: []*Reservation{settling}}, false, none, ReasonYielding, 50 * time.Second, "",
			[]string{"1 of its 11 addresses are retained", "none of which may be released yet (deleted within the last 20 s", "retry in ~50 s"}},
		{"already releasing", Holders{Releasing: []*Reservation{rel}, NotYet: []*Reservation{notYet}}, false, none, ReasonYielding, 50 * time.Second, "",
			[]string{"2 of its 11 addresses are retained for deleted Services and already being released", "retry in ~50 s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusal, yield := rulesPolicy.PoolFull(dc, tc.hs).Decide(tc.dry, tc.waiting, rulesNow)
			switch {
			case tc.reason != "":
				wantRefusal(t, refusal, tc.reason, tc.retry, tc.fragments...)
			case refusal != nil:
				t.Fatalf("refused: %s", refusal.Message)
			}
			if got := ""; yield != nil {
				got = yield.ID
				if got != tc.yield {
					t.Errorf("yields %q, want %q", got, tc.yield)
				}
			} else if tc.yield != "" {
				t.Errorf("yields nothing, want %q", tc.yield)
			}
		})
	}
}

func TestFullAnswers(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	h := held("y1", 11, "a", rulesNow.Add(-time.Hour), rulesNow.Add(time.Hour))
	f := rulesPolicy.PoolFull(dc, Holders{Yieldable: []*Reservation{h}, NotYet: []*Reservation{h}})
	var live []*Reservation
	for i := range 12 {
		live = append(live, held(fmt.Sprint(i), 11+i, fmt.Sprintf("svc-%02d", 11-i), time.Time{}, time.Time{}))
	}
	share := rulesPolicy.ShareFull("payments", 12, 12, dc, Holders{Live: live})
	for _, tc := range []struct {
		name      string
		err       *Error
		reason    Reason
		retry     time.Duration
		fragments []string
	}{
		{"yielded", f.Yielded(h), ReasonYielding, 50 * time.Second,
			[]string{`pool "dc" is full; 2 of its 11 addresses are retained`, "the oldest (172.16.4.11, of the deleted payments/a) is being released", "retry in ~50 s"}},
		{"changed since the listing", f.Changed(h), ReasonYielding, time.Second,
			[]string{"the oldest (172.16.4.11) changed since the pool was listed", "retry in a moment"}},
		{"all in use: sorted, ten named", share.AllInUse(), ReasonShareExhausted, 0,
			[]string{"namespace payments holds 12/12 addresses of pool \"dc\", all used by its live Services: svc-00, svc-01,", "svc-09, and 2 more; delete one"}},
		{"out of time", OutOfTime(dc), ReasonYielding, time.Second,
			[]string{`pool "dc" is full and the admission's deadline ran out`, "retry in a moment"}},
		{"share race", ShareRace("payments", 3, dc), ReasonYielding, time.Second,
			[]string{`namespace payments reached its 3 addresses of pool "dc" while this admission booked`}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefusal(t, tc.err, tc.reason, tc.retry, tc.fragments...) })
	}
}

func TestWithin(t *testing.T) {
	ips := ReadAll([]*scaleway.IP{{ID: "a"}, {ID: "b"}, {ID: "c"}}, rulesNow)
	for _, tc := range []struct {
		name string
		id   string
		n    int
		want bool
	}{
		{"the oldest", "a", 2, true},
		{"the last with room", "b", 2, true},
		{"past the share", "c", 2, false},
		{"not listed", "d", 3, false},
		{"no room", "a", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Within(ips, tc.id, tc.n); got != tc.want {
				t.Errorf("Within(%s, %d) = %v, want %v", tc.id, tc.n, got, tc.want)
			}
		})
	}
}

func TestInShare(t *testing.T) {
	dc := rulesPool(t, rulesConfig(t), "dc")
	ours := Entry{Cluster: "prod", Pool: "dc", Service: svcAPI}
	for _, tc := range []struct {
		name string
		ip   *scaleway.IP
		want bool
	}{
		{"ours, of the namespace, in the pool", ledgerIP("ip", subA, "172.16.4.11", ours), true},
		{"retained counts too", ledgerIP("ip", subA, "172.16.4.11", retained(ours, time.Hour, time.Hour)), true},
		{"another cluster's", ledgerIP("ip", subA, "172.16.4.11", Entry{Cluster: "old", Pool: "dc", Service: svcAPI}), false},
		{"another namespace's", ledgerIP("ip", subA, "172.16.4.11", Entry{Cluster: "prod", Pool: "dc", Service: types.NamespacedName{Namespace: "web", Name: "api"}}), false},
		{"outside the pool's ranges", ledgerIP("ip", subA, "172.16.4.105", ours), false},
		{"another subnet", ledgerIP("ip", subB, "172.16.4.11", ours), false},
		{"not in the ledger", &scaleway.IP{ID: "ip", SubnetID: subA, Address: netip.MustParseAddr("172.16.4.11")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InShare("prod", "payments", dc, Read(tc.ip, rulesNow)); got != tc.want {
				t.Errorf("InShare = %v, want %v", got, tc.want)
			}
		})
	}
}
