package servicecache

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// IndexPrivateIPIDs indexes Records by the IPAM IDs live Services
// reference (Record.LiveIDs).
const IndexPrivateIPIDs = "scw-lb-ipam.io/private-ip-ids"

// Informer is the process's one watch of Services: a client-go
// informer that holds every Service of the cluster as a Record (its
// transform is RecordService), indexed by IndexPrivateIPIDs. The webhook
// and the sweeper read it and register their handlers on it; add it to the
// manager as a Runnable. Not a controller-runtime cache: its reader copies
// what it holds into a *corev1.Service, which a Record is not.
type Informer struct {
	informer toolscache.SharedIndexInformer
}

// NewInformer watches the Services of the cluster cfg points at. It
// builds the core/v1 client alone: client-go's whole clientset would add
// 9 MB to the binary, and its code pages to every replica's RSS.
func NewInformer(cfg *rest.Config) (*Informer, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for the Service informer: %w", err)
	}
	return newInformer(core, core)
}

// newInformer lists and watches through core; client is what
// client-go asks whether it can stream the first listing (a fake clientset
// cannot).
func newInformer(core corev1client.ServicesGetter, client any) (*Informer, error) {
	services := core.Services(metav1.NamespaceAll)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return services.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return services.Watch(ctx, o)
		},
	}
	// As client-go's own informers: a fake clientset, which cannot stream
	// the first listing, lists instead.
	inf := toolscache.NewSharedIndexInformerWithOptions(toolscache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Service{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{IndexPrivateIPIDs: indexLiveIDs}})
	if err := inf.SetTransform(RecordService); err != nil {
		return nil, err
	}
	return &Informer{informer: inf}, nil
}

func indexLiveIDs(obj any) ([]string, error) {
	if r, ok := obj.(*Record); ok {
		return r.LiveIDs(), nil
	}
	return nil, nil
}

// Start runs the informer until ctx ends.
func (s *Informer) Start(ctx context.Context) error {
	s.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica admits, so every replica
// watches.
func (s *Informer) NeedLeaderElection() bool { return false }

// HasSynced reports whether the informer holds the first listing: before
// it, every Service would look absent.
func (s *Informer) HasSynced() bool { return s.informer.HasSynced() }

// AddEventHandler registers h; the objects it is handed are *Record.
func (s *Informer) AddEventHandler(h toolscache.ResourceEventHandler) error {
	_, err := s.informer.AddEventHandler(h)
	return err
}

// Store holds the Records, read in place: the informer replaces a changed
// Service's Record rather than writing to it.
func (s *Informer) Store() toolscache.Store { return s.informer.GetIndexer() }

// Records reads the informer's Records.
func (s *Informer) Records() Records {
	return Records{Indexer: s.informer.GetIndexer(), Synced: s.HasSynced}
}

// RecordIndexer is what Records reads of an informer's indexer.
type RecordIndexer interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
	GetByKey(key string) (item any, exists bool, err error)
}

// Records answers the allocator's "who references this ID" (it implements
// allocator.References) from the Service informer's Records, in memory.
type Records struct {
	Indexer RecordIndexer
	// Synced reports whether the informer has synced; nil when it always
	// has.
	Synced func() bool
}

// errNotSynced: before its first listing, the informer would answer that
// no Service references anything.
var errNotSynced = errors.New("the Service informer has not synced yet")

// ReferencedBy lists the live Services referencing id.
func (r Records) ReferencedBy(_ context.Context, id string) ([]types.NamespacedName, error) {
	if r.Synced != nil && !r.Synced() {
		return nil, errNotSynced
	}
	objs, err := r.Indexer.ByIndex(IndexPrivateIPIDs, id)
	if err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, 0, len(objs))
	for _, obj := range objs {
		if rec, ok := obj.(*Record); ok {
			out = append(out, rec.Key())
		}
	}
	return out, nil
}

// Exists reports whether the Service of that name exists, Terminating
// included.
func (r Records) Exists(_ context.Context, svc types.NamespacedName) (bool, error) {
	if r.Synced != nil && !r.Synced() {
		return false, errNotSynced
	}
	_, ok, err := r.Indexer.GetByKey(svc.String())
	return ok, err
}
