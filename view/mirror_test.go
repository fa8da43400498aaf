package view

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestDigestSurvivesTheRoundTrip: an object written, then read back from
// the apiserver as JSON, has the digest it was written with, so that a
// new leader writes nothing over an unchanged view; a change of any field
// changes it.
func TestDigestSurvivesTheRoundTrip(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	for _, status := range []any{
		&ReservationStatus{Address: "172.16.35.7", Pool: "dc-link", Service: "api", State: StateRetained, RetainedSince: &at, ReleaseAt: &at, AttachedTo: "lb_server/x (a)"},
		&ReservationStatus{Address: "172.16.35.8", Service: "other/gw", State: StateLive},
		&PoolStatus{PrivateNetworkID: "pn", Subnet: "172.16.32.0/22", Ranges: []string{"172.16.35.1-172.16.35.120"}, Total: 120, Free: 3, InUse: 100, Retained: 17,
			Conditions: []metav1.Condition{{Type: PoolExhausted, Status: metav1.ConditionFalse, Reason: "AddressesFree", Message: "3 of 120", LastTransitionTime: at}}},
	} {
		k := objectKey{ReservationKind.Kind, "web", "id"}
		var back any = &ReservationStatus{}
		if _, ok := status.(*PoolStatus); ok {
			k, back = objectKey{PoolKind.Kind, "", "dc-link"}, &PoolStatus{}
		}
		u := object(k, status)
		b, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		read := &unstructured.Unstructured{}
		if err := read.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		m := &Mirror{known: map[objectKey]uint64{}, conditions: map[string][]metav1.Condition{}}
		m.learn(k.gvk(), read)
		if m.known[k] != digest(status) {
			t.Errorf("%T: digest %x read back, %x written", status, m.known[k], digest(status))
		}
		st, _, _ := unstructured.NestedMap(read.Object, "status")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, back); err != nil {
			t.Fatal(err)
		}
		if r, ok := back.(*ReservationStatus); ok {
			r.Address = "10.0.0.1"
			if digest(r) == digest(status) {
				t.Errorf("%T: a changed address keeps the digest", status)
			}
		}
	}
}

// TestPoolConditions: exhausted when no address is free, unknown when the
// pool is too wide to count, and the missing network named.
func TestPoolConditions(t *testing.T) {
	cond := func(p Pool, typ string) metav1.Condition {
		for _, c := range p.Conditions() {
			if c.Type == typ {
				return c
			}
		}
		t.Fatalf("no condition %s", typ)
		return metav1.Condition{}
	}
	full := Pool{Name: "a", Known: true, Status: PoolStatus{PrivateNetworkID: "pn-1", Total: 4, InUse: 2, Retained: 1, HeldByOthers: 1}}
	if c := cond(full, PoolExhausted); c.Status != metav1.ConditionTrue || c.Reason != "NoAddressFree" {
		t.Errorf("a full pool: %+v", c)
	}
	free := full
	free.Status.Free, free.Status.InUse = 1, 1
	if c := cond(free, PoolExhausted); c.Status != metav1.ConditionFalse || c.Message != "1 of 4 addresses free" {
		t.Errorf("a pool with room: %+v", c)
	}
	wide := Pool{Name: "v6", Known: true}
	if c := cond(wide, PoolExhausted); c.Status != metav1.ConditionUnknown {
		t.Errorf("a pool too wide to count: %+v", c)
	}
	gone := full
	gone.NetworkMissing = true
	if c := cond(gone, PoolNetworkMissing); c.Status != metav1.ConditionTrue || c.Reason != "NotFound" {
		t.Errorf("a missing network: %+v", c)
	}
}

// TestPoolsOf: the counts are the inventory's, in use without the
// retained ones (which the gauge's used_by_cluster includes).
func TestPoolsOf(t *testing.T) {
	cfg, err := ipam.ParseConfig([]byte("clusterName: c\nregion: fr-par\nclusterPrivateNetworkID: 00000000-0000-4000-8000-000000000000\npools:\n  - {name: a, privateNetworkID: 00000000-0000-4000-8000-00000000000a}\n  - {name: b, privateNetworkID: 00000000-0000-4000-8000-00000000000b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := PoolsOf(cfg, []ipam.PoolStats{{Pool: "a", Total: 10, UsedByCluster: 4, Retained: 1, UsedByOthers: 2, Free: 4, Known: true}})
	if len(got) != 2 || !got[0].Known || got[1].Known {
		t.Fatalf("pools %+v, want a known and b not listed yet", got)
	}
	if st := got[0].Status; st.InUse != 3 || st.Retained != 1 || st.HeldByOthers != 2 || st.Free != 4 || st.Total != 10 || st.PrivateNetworkID != "00000000-0000-4000-8000-00000000000a" {
		t.Errorf("pool a: %+v", st)
	}
}
