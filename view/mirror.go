package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// DefaultWorkers is how many writes a Mirror has in flight: a leader's
// first cycle at 10,000 reservations writes 10,000 objects, one at a time
// a round trip each.
const DefaultWorkers = 8

// QPS bounds the rate of the Mirror's client (its Burst is twice it): a
// first install's 10,000 reservations are 20,000 writes (their objects and
// their Services' conditions), within the 1-minute sweep interval at this
// rate, and no faster, so that a first sync does not crowd the apiserver.
const QPS = 400

// DefaultResync is how often a Mirror reads the view back from the
// apiserver: what someone else removed (an object deleted, the CRDs
// re-installed, a namespace re-created) is written again within it.
const DefaultResync = 10 * time.Minute

// Options configures a Mirror.
type Options struct {
	// Client writes the objects and the Services' conditions (server-side
	// apply, field manager ManagedBy).
	Client client.Client
	// Reader reads from the apiserver, not a cache: the objects at the
	// start of a leader's term, a Service before its conditions change.
	Reader client.Reader
	// Pools are the pools' occupancy now (PoolsOf); nil shows no pool.
	Pools   func() []Pool
	Clock   clock.PassiveClock
	Workers int
	// Resync is how often the view is read back (DefaultResync).
	Resync time.Duration
	Log    logr.Logger
}

// Writes counts what one Publish wrote.
type Writes struct {
	Objects  int // IPPools and IPReservations created or changed
	Deleted  int
	Services int // Services whose conditions changed
	Errors   int
	// Failed is the first failure, for the log: every one is retried.
	Failed error
}

// fail counts a failed write, keeping the first.
func (w *Writes) fail(err error) {
	w.Errors++
	if w.Failed == nil {
		w.Failed = err
	}
}

// Total is every write.
func (w Writes) Total() int { return w.Objects + w.Deleted + w.Services }

// Mirror writes each Snapshot into the apiserver, and only what differs
// from what it holds there.
type Mirror struct {
	o  Options
	mu sync.Mutex
	// known is the digest of the status of every object of the view the
	// apiserver holds, by kind, namespace and name: read in full once a
	// term (Reset), then kept by the writes.
	known map[objectKey]uint64
	// conditions are the pools' conditions as written, with their
	// transition times.
	conditions map[string][]metav1.Condition
	// listed is when known was read, zero to read it at the next Publish.
	listed time.Time
}

type objectKey struct {
	kind, namespace, name string
}

// NewMirror returns a Mirror with defaults filled in.
func NewMirror(o Options) *Mirror {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	return &Mirror{o: o}
}

// Reset forgets what the apiserver holds: the next Publish reads it again.
// Called at the start of each leader term, since another leader may have
// written meanwhile.
func (m *Mirror) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listed = time.Time{}
}

// ErrNoCRDs is returned while the view's CustomResourceDefinitions are
// not installed.
var ErrNoCRDs = errors.New("the CustomResourceDefinitions ippools.scw-lb-ipam.io and ipreservations.scw-lb-ipam.io are not installed: install or upgrade the chart, which installs them")

// Publish writes snap: the reservations and pools that changed, the
// deletion of those gone, and the Services' conditions that changed.
func (m *Mirror) Publish(ctx context.Context, snap *Snapshot) (Writes, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var w Writes
	if m.listed.IsZero() || m.o.Clock.Since(m.listed) >= m.o.Resync {
		now := m.o.Clock.Now()
		if err := m.list(ctx); err != nil {
			m.listed = time.Time{}
			w.Errors++
			return w, err
		}
		m.listed = now
	}
	m.writeObjects(ctx, m.objects(snap), &w)
	m.writeConditions(ctx, snap.Services, &w)
	return w, nil
}

// writeObjects applies the desired objects that differ from what the
// apiserver holds and deletes those it holds that are not desired.
func (m *Mirror) writeObjects(ctx context.Context, desired map[objectKey]desiredObject, w *Writes) {
	// What to write is decided before the writes start: they update known.
	var applies, deletes []objectKey
	for k, o := range desired {
		if o.status != nil && m.known[k] != o.digest {
			applies = append(applies, k)
		}
	}
	for k := range m.known {
		if _, ok := desired[k]; !ok {
			deletes = append(deletes, k)
		}
	}
	var mu sync.Mutex
	done := func(k objectKey, err error, what string, ok func()) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			w.fail(fmt.Errorf("%s %s %s/%s: %w", what, k.kind, k.namespace, k.name, err))
			return
		}
		ok()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.o.Workers)
	for _, k := range applies {
		o := desired[k]
		g.Go(func() error {
			written, err := m.apply(gctx, object(k, o.status))
			done(k, err, "writing", func() {
				m.known[k] = o.digest
				if written {
					w.Objects++
				}
			})
			return nil
		})
	}
	for _, k := range deletes {
		g.Go(func() error {
			done(k, m.delete(gctx, k), "deleting", func() { delete(m.known, k); w.Deleted++ })
			return nil
		})
	}
	_ = g.Wait()
}

// writeConditions writes the conditions of each Service whose digest
// differs from the one it carries.
func (m *Mirror) writeConditions(ctx context.Context, services []ServiceConditions, w *Writes) {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.o.Workers)
	for _, sc := range services {
		if servicecache.ConditionsDigest(sc.Conditions) == sc.Digest {
			continue
		}
		g.Go(func() error {
			wrote, err := m.conditionsOf(gctx, sc)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				w.fail(fmt.Errorf("writing the conditions of Service %s/%s: %w", sc.Namespace, sc.Name, err))
			case wrote:
				w.Services++
			}
			return nil
		})
	}
	_ = g.Wait()
}

// desiredObject is an object of the view as it should be: its status (a
// *ReservationStatus or *PoolStatus), nil for one to keep as it is (a pool
// not listed yet). The object itself is made only to be written: at
// 10,000 reservations, made for every one each cycle, objects would weigh
// on the leader's heap for nothing.
type desiredObject struct {
	status any
	digest uint64
}

// objects are the objects snap and the pools make, by key.
func (m *Mirror) objects(snap *Snapshot) map[objectKey]desiredObject {
	out := make(map[objectKey]desiredObject, len(snap.Reservations))
	for i := range snap.Reservations {
		r := &snap.Reservations[i]
		out[objectKey{ReservationKind.Kind, r.Namespace, r.ID}] = desiredObject{&r.Status, digest(&r.Status)}
	}
	if m.o.Pools == nil {
		return out
	}
	now := metav1.NewTime(m.o.Clock.Now().Truncate(time.Second))
	for _, p := range m.o.Pools() {
		k := objectKey{PoolKind.Kind, "", p.Name}
		if !p.Known {
			out[k] = desiredObject{}
			continue
		}
		conds := m.conditions[p.Name]
		for _, c := range p.Conditions() {
			c.LastTransitionTime = now
			meta.SetStatusCondition(&conds, c)
		}
		m.conditions[p.Name] = conds
		st := p.Status
		st.Conditions = conds
		out[k] = desiredObject{&st, digest(&st)}
	}
	return out
}

// object is the object at k showing status.
func object(k objectKey, status any) *unstructured.Unstructured {
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		// Only plain fields: a failure is a bug of this package.
		panic(fmt.Sprintf("view: %s %s: %v", k.kind, k.name, err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	u.SetGroupVersionKind(k.gvk())
	u.SetNamespace(k.namespace)
	u.SetName(k.name)
	u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": ManagedBy})
	return u
}

func (k objectKey) gvk() schema.GroupVersionKind {
	if k.kind == PoolKind.Kind {
		return PoolKind
	}
	return ReservationKind
}

// digest identifies a status (a *ReservationStatus or *PoolStatus) by its
// JSON: written, then read back into its type, an object has the digest it
// was written with (times are whole seconds both ways).
func digest(status any) uint64 {
	b, _ := json.Marshal(status)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// apply writes u; written is false when its namespace is gone or being
// deleted (with its Services): the reservation is released in time, and
// a namespace re-created meanwhile gets it at the next resync.
func (m *Mirror) apply(ctx context.Context, u *unstructured.Unstructured) (written bool, err error) {
	err = m.o.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(ManagedBy), client.ForceOwnership)
	if u.GetNamespace() != "" && (apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)) {
		return false, nil
	}
	return err == nil, err
}

func (m *Mirror) delete(ctx context.Context, k objectKey) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.gvk())
	u.SetNamespace(k.namespace)
	u.SetName(k.name)
	return client.IgnoreNotFound(m.o.Client.Delete(ctx, u))
}

// conditionsOf writes the conditions of one Service, keeping the
// transition time of each whose status does not change. A Service that
// carries conditions of ours is read first for those times (one read per
// change, never per cycle); one that carries none, as every Service at a
// first install, is not read. The write names the Service's UID, so that
// it never lands on a re-created namesake.
func (m *Mirror) conditionsOf(ctx context.Context, sc ServiceConditions) (wrote bool, err error) {
	var current []metav1.Condition
	if sc.Digest != 0 {
		var svc corev1.Service
		if err := m.o.Reader.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.Name}, &svc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if string(svc.UID) != sc.UID || svc.DeletionTimestamp != nil {
			return false, nil
		}
		if servicecache.ConditionsDigest(svc.Status.Conditions) == servicecache.ConditionsDigest(sc.Conditions) {
			return false, nil // the cache had not seen the last write yet
		}
		current = svc.Status.Conditions
	}
	now := metav1.NewTime(m.o.Clock.Now().Truncate(time.Second))
	status := corev1ac.ServiceStatus()
	for _, c := range sc.Conditions {
		since := now
		if old := meta.FindStatusCondition(current, c.Type); old != nil && old.Status == c.Status {
			since = old.LastTransitionTime
		}
		status.WithConditions(metav1ac.Condition().WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).
			WithMessage(c.Message).WithLastTransitionTime(since))
	}
	ac := corev1ac.Service(sc.Name, sc.Namespace).WithUID(types.UID(sc.UID)).WithStatus(status)
	err = m.o.Client.Status().Apply(ctx, ac, client.FieldOwner(ManagedBy), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return false, nil // gone: nothing to say of it
	}
	// A namesake re-created since the cache's Record has another UID: the
	// write is refused (counted failed), and the next cycle judges it.
	return err == nil, err
}
