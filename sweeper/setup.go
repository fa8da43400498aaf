package sweeper

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// SetupWithManager runs a Sweeper in mgr: it reads Services from services
// and Namespaces from the manager's cache (and never acts before both have
// synced), records its Events with the manager's recorder, is triggered by
// the Service informer, and runs on the replica that holds the Lease when e
// is enabled. The ServiceStore, Namespaces, Synced, Events and Recorder of
// o are filled in from services and mgr when unset.
func SetupWithManager(ctx context.Context, mgr manager.Manager, services *servicecache.Informer, o Options, e Election) (*Sweeper, error) {
	if o.ServiceStore == nil && o.Services == nil {
		o.ServiceStore = services.Store()
	}
	if o.Namespaces == nil {
		o.Namespaces = mgr.GetCache()
	}
	if o.Synced == nil {
		o.Synced = func() bool {
			// Never act on a partial view: every reservation would look unused.
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return services.HasSynced() && mgr.GetCache().WaitForCacheSync(ctx)
		}
	}
	if o.Events == nil {
		o.Events = mgr.GetAPIReader()
	}
	if o.Recorder == nil {
		o.Recorder = mgr.GetEventRecorder("scw-lb-ipam-sweeper")
	}
	sw := New(o)
	if err := services.AddEventHandler(sw.Handler()); err != nil {
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
