package certs

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// SetupWithManager keeps the webhook's certificates in mgr, self-managed:
// it makes sure of the Secret, the files in o.CertDir and the caBundle
// right away, since the webhook and metrics servers read the files when
// the manager starts them, then re-checks them while the manager runs. The
// Secret is read and written through a direct client (o.Client when set),
// as the manager's cache is not up yet.
func SetupWithManager(ctx context.Context, mgr manager.Manager, o Options) error {
	if o.Client == nil {
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		o.Client = direct
	}
	k := New(o)
	if err := k.Ensure(ctx); err != nil {
		return fmt.Errorf("self-managed TLS: %w", err)
	}
	return mgr.Add(k)
}
