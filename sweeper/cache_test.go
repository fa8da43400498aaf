package sweeper

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// servedList serves a fixed list of Services, deep-copied, as the cache
// reader does.
type servedList []corev1.Service

func (l servedList) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("not supported")
}

func (l servedList) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	(&corev1.ServiceList{Items: l}).DeepCopyInto(list.(*corev1.ServiceList))
	return nil
}

// refEvents records each Event with the full reference of its object.
type refEvents struct {
	scheme *runtime.Scheme
	list   []string
}

func (e *refEvents) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	ref, err := reference.GetReference(e.scheme, regarding)
	e.list = append(e.list, fmt.Sprintf("%s %s %+v %v: %s", eventtype, reason, *ref, err, fmt.Sprintf(note, args...)))
}

// servedLB is a live LoadBalancer Service as the apiserver serves it once its
// Load Balancer exists: what a servicecache.Record drops is all there.
func servedLB(name string, ann map[string]string) corev1.Service {
	a := map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`,
		ccm.AnnotationLoadBalancerID:                       "fr-par-1/0b4b3e2c-4c47-4d1b-9f5e-1f3ad2a1e0aa",
		ccm.AnnotationPrivate:                              "true",
	}
	for k, v := range ann {
		a[k] = v
	}
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7" + name,
			Labels: map[string]string{"app": name}, Annotations: a, Finalizers: []string{ccm.FinalizerLoadBalancerCleanup},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443, NodePort: 31443}},
			Selector: map[string]string{"app": name}, ClusterIP: "10.96.0.10"},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "172.16.35.200"}}}},
	}
}

// recordStore is the Service informer's store holding svcs, as its
// transform (servicecache.RecordService) made them.
func recordStore(t *testing.T, svcs ...corev1.Service) toolscache.Store {
	t.Helper()
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for i := range svcs {
		rec, err := servicecache.RecordService(svcs[i].DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// TestCycleOnRecords runs the same cycle twice over the same reservations,
// once reading the Services as served and once as the Service informer
// holds them (servicecache.RecordService): the reports, the Events and the ledger
// must be the same.
func TestCycleOnRecords(t *testing.T) {
	id := func(s string) string { return "5eeb0000-0000-4000-8000-0000000000" + s }
	const (
		idA, idShared, idOrphan, idTerminating, idClusterIP, idBack = "0a", "0b", "0c", "0d", "0e", "0f"
	)
	now := metav1.Now()
	services := []corev1.Service{
		servedLB("a", map[string]string{request.AnnotationPool: "dc-link", ccm.AnnotationPrivateIPIDs: id(idA)}),
		servedLB("s1", map[string]string{ccm.AnnotationPrivateIPIDs: id(idShared)}),
		servedLB("s2", map[string]string{ccm.AnnotationPrivateIPIDs: " " + id(idShared) + " ,"}),
		servedLB("back", map[string]string{request.AnnotationPool: "dc-link", ccm.AnnotationPrivateIPIDs: id(idBack)}),
		func() corev1.Service {
			s := servedLB("terminating", map[string]string{ccm.AnnotationPrivateIPIDs: id(idTerminating)})
			s.DeletionTimestamp = &now
			return s
		}(),
		func() corev1.Service {
			s := servedLB("cluster", map[string]string{ccm.AnnotationPrivateIPIDs: id(idClusterIP)})
			s.Spec.Type = corev1.ServiceTypeClusterIP
			return s
		}(),
		// Live with no IDs: reported unreserved (a pool, the default pool),
		// or not (externally managed).
		servedLB("unreserved", map[string]string{request.AnnotationPool: "dc-link"}),
		servedLB("default", nil),
		servedLB("shared-lb", map[string]string{ccm.AnnotationExternallyManaged: "true"}),
	}
	run := func(t *testing.T, svcs []corev1.Service, store toolscache.Store) (Report, []string, map[string]ipam.Entry) {
		w := newWorld(t)
		old := w.Clock.Now().Add(-48 * time.Hour)
		for i, s := range []struct {
			id, svc  string
			orphaned bool
		}{
			{idA, "a", false}, {idShared, "s1", false}, {idOrphan, "gone", true}, {idTerminating, "terminating", false},
			{idClusterIP, "cluster", false}, {idBack, "back", true},
		} {
			e := ipam.Entry{Cluster: "prod", Pool: "dc-link", Service: types.NamespacedName{Namespace: "payments", Name: s.svc}}
			if s.orphaned {
				e.OrphanedSince = old
			}
			addr := netip.AddrFrom4([4]byte{172, 16, 35, byte(200 + i)})
			if _, err := w.Srv.AddIPWithID(id(s.id), w.PNs["dc"].ID, addr, e.Tags(), nil); err != nil {
				t.Fatal(err)
			}
		}
		rec := &refEvents{scheme: fixtures.Scheme()}
		s := w.sweeper(func(o *Options) {
			o.Services, o.ServiceStore, o.Recorder, o.Namespaces = servedList(svcs), store, rec, w.Kube
		})
		rep, err := s.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ledger := map[string]ipam.Entry{}
		for _, k := range []string{idA, idShared, idOrphan, idTerminating, idClusterIP, idBack} {
			if ip, ok := w.Srv.IP(id(k)); ok {
				e, _ := ipam.ParseEntry(ip.Tags)
				ledger[k] = e
			}
		}
		return rep, rec.list, ledger
	}
	fullRep, fullEvents, fullLedger := run(t, services, nil)
	rep, events, ledger := run(t, nil, recordStore(t, services...))
	if !reflect.DeepEqual(fullRep, rep) {
		t.Errorf("report:\n served %+v\n cached %+v", fullRep, rep)
	}
	slices.Sort(fullEvents)
	slices.Sort(events)
	if !slices.Equal(fullEvents, events) {
		t.Errorf("events:\n served %s\n cached %s", strings.Join(fullEvents, "\n        "), strings.Join(events, "\n        "))
	}
	if !reflect.DeepEqual(fullLedger, ledger) {
		t.Errorf("ledger:\n served %+v\n cached %+v", fullLedger, ledger)
	}
	// The scenario covers what it means to: a backfill, a share, a release,
	// two orphans tagged, an untag and two unreserved Services.
	if fullRep.Backfilled == 0 || fullRep.Shared != 1 || len(fullRep.Released) != 1 || fullRep.Tagged != 2 || fullRep.Untagged != 1 || fullRep.Unreserved != 2 {
		t.Errorf("the scenario did not happen: %+v", fullRep)
	}
}

// TestTriggerOnRecords: the informer hands the sweeper's handler Records;
// it must trigger on the changes that may free or claim an IP and on no
// other, and queue a creation's back-fill.
func TestTriggerOnRecords(t *testing.T) {
	base := servedLB("api", map[string]string{ccm.AnnotationPrivateIPIDs: "5eeb0000-0000-4000-8000-000000000001"})
	edit := func(f func(*corev1.Service)) corev1.Service {
		s := *base.DeepCopy()
		f(&s)
		return s
	}
	now := metav1.Now()
	changes := map[string]struct {
		svc  corev1.Service
		want bool
	}{
		"IDs": {edit(func(s *corev1.Service) {
			s.Annotations[ccm.AnnotationPrivateIPIDs] = "5eeb0000-0000-4000-8000-000000000002"
		}), true},
		"IDs removed":  {edit(func(s *corev1.Service) { delete(s.Annotations, ccm.AnnotationPrivateIPIDs) }), true},
		"type":         {edit(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), true},
		"terminating":  {edit(func(s *corev1.Service) { s.DeletionTimestamp = &now }), true},
		"labels":       {edit(func(s *corev1.Service) { s.Labels["team"] = "edge" }), false},
		"status":       {edit(func(s *corev1.Service) { s.Status = corev1.ServiceStatus{} }), false},
		"last-applied": {edit(func(s *corev1.Service) { s.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}" }), false},
	}
	for name, next := range changes {
		s := New(Options{})
		s.Handler().OnUpdate(servicecache.NewRecord(&base), servicecache.NewRecord(&next.svc))
		if got := len(s.trigger) > 0; got != next.want {
			t.Errorf("%s: triggered %v, want %v", name, got, next.want)
		}
	}
	// A creation queues the Service's own back-fill on the leader, and
	// triggers no cycle.
	queued := func(svc *corev1.Service) bool {
		s := New(Options{})
		s.backfills.lead(true)
		s.Handler().OnAdd(servicecache.NewRecord(svc), false)
		return s.backfills.queued() > 0 && len(s.trigger) == 0
	}
	for name, want := range map[string]bool{"with IDs": true, "without": false} {
		svc := base
		if !want {
			svc = servedLB("x", nil)
		}
		if got := queued(&svc); got != want {
			t.Errorf("add %s: queued %v, want %v", name, got, want)
		}
	}
}
