package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// Options configures SetupWithManager.
type Options struct {
	// Path the MutatingWebhookConfiguration calls.
	Path      string
	Allocator Allocator
	// Excluded namespaces are never touched (kube-system, the release's own).
	Excluded []string
	// Timeout is the webhook configuration's timeoutSeconds; admissions
	// answer within it (see WithAdmissionDeadline).
	Timeout    time.Duration
	Registerer prometheus.Registerer
	Log        logr.Logger
}

// SetupWithManager builds the Service mutator for the manager's webhook
// server, which Register serves at o.Path. It reads Services from services
// (the allocator's References read its index), starts the Namespace
// informer, and makes the pod ready only once the webhook server serves and
// both have synced: the Service endpoint then routes the apiserver's calls
// to this pod, and no admission is decided on an empty cache.
func SetupWithManager(ctx context.Context, mgr manager.Manager, services *servicecache.Informer, o Options) (*ServiceMutator, error) {
	mutator := &ServiceMutator{
		Allocator:      o.Allocator,
		Namespaces:     mgr.GetCache(),
		NamespacesLive: mgr.GetAPIReader(),
		Excluded:       o.Excluded,
		Recorder:       mgr.GetEventRecorder("scw-lb-ipam"),
		Metrics:        NewMetrics(o.Registerer),
		Log:            o.Log,
	}
	// The Namespace informer is started here, not on the first admission's
	// read.
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return nil, fmt.Errorf("watching Namespaces: %w", err)
	}
	if err := services.AddEventHandler(watchServices(mutator)); err != nil {
		return nil, fmt.Errorf("watching Services: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !services.HasSynced() || !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the Service and Namespace caches have not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mutator, nil
}

// Register serves h (the Service mutator SetupWithManager built) on the
// manager's webhook server at o.Path, within o.Timeout; once draining holds
// (the process is stopping), each answer closes its connection.
func Register(mgr manager.Manager, o Options, h admission.Handler, draining func() bool) {
	hook := WithAdmissionDeadline(&admission.Webhook{Handler: h}, o.Timeout)
	mgr.GetWebhookServer().Register(o.Path, closeWhileDraining(hook, draining))
}

// watchServices hands the allocator the IDs every Service references, as
// they arrive: another replica's bookings reach this replica through the
// Service informer within moments, and its reservation index through its
// next listing only. Deletions add nothing: the IDs were remembered when
// the Service appeared. It also records the Events held for a Service this
// replica admitted, once it exists (heldEvents).
func watchServices(m *ServiceMutator) toolscache.ResourceEventHandler {
	seen := func(obj any) {
		if rec, ok := obj.(*servicecache.Record); ok {
			m.Allocator.Remember(rec.Key(), rec.ReferencedIDs())
			m.seen(rec)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}
}
