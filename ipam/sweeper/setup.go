package sweeper

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// SetupWithManager runs a Sweeper in mgr: it reads Services from the
// manager's cache (and never acts before that cache has synced), records
// its Events with the manager's recorder, is triggered by the Service
// informer, and runs on the replica that holds the Lease when e is enabled.
// The Services, Namespaces, Synced, Events and Recorder of o are filled in
// from mgr when unset, and ServiceStore with the informer's store when
// Services is the manager's cache.
func SetupWithManager(ctx context.Context, mgr manager.Manager, o Options, e Election) (*Sweeper, error) {
	if o.Services == nil {
		o.Services = mgr.GetCache()
	}
	if o.Namespaces == nil {
		o.Namespaces = mgr.GetCache()
	}
	if o.Synced == nil {
		o.Synced = func() bool {
			// Never act on a partial view: every reservation would look unused.
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return mgr.GetCache().WaitForCacheSync(ctx)
		}
	}
	if o.Events == nil {
		o.Events = mgr.GetAPIReader()
	}
	if o.Recorder == nil {
		o.Recorder = mgr.GetEventRecorder("scw-lb-ipam-sweeper")
	}
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Service{})
	if err != nil {
		return nil, fmt.Errorf("watching Services: %w", err)
	}
	if st, ok := informer.(interface{ GetStore() toolscache.Store }); ok && o.ServiceStore == nil && o.Services == mgr.GetCache() {
		o.ServiceStore = st.GetStore()
	}
	sw := New(o)
	if _, err := informer.AddEventHandler(sw.Handler()); err != nil {
		return nil, fmt.Errorf("watching Services: %w", err)
	}
	var run manager.Runnable = manager.RunnableFunc(sw.Start)
	if e.Enabled {
		lr, err := newLeaderRunner(mgr.GetConfig(), e, sw.Start)
		if err != nil {
			return nil, err
		}
		run = lr
	}
	return sw, mgr.Add(run)
}
