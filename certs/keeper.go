package certs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of a Keeper.
const (
	DefaultCAValidity      = 5 * 365 * 24 * time.Hour
	DefaultServingValidity = 365 * 24 * time.Hour
	// DefaultRenewFraction renews a certificate when a third of its life is left.
	DefaultRenewFraction = 1.0 / 3
	// DefaultCheckInterval also bounds how long a caBundle reset by someone
	// else (a re-applied manifest) stays wrong.
	DefaultCheckInterval = time.Minute
)

// Options configures a Keeper.
type Options struct {
	// Client talks to the apiserver directly (not through a cache): the
	// Secret is read and written before the manager's cache starts.
	Client     client.Client
	Namespace  string
	SecretName string
	// ServiceName is the webhook's Service; the certificate covers its
	// in-cluster DNS names.
	ServiceName string
	// WebhookConfigName is the MutatingWebhookConfiguration whose caBundle
	// is kept current.
	WebhookConfigName string
	// CertDir receives tls.crt and tls.key for the webhook server.
	CertDir         string
	Clock           clock.PassiveClock
	CAValidity      time.Duration
	ServingValidity time.Duration
	RenewFraction   float64
	CheckInterval   time.Duration
	Log             logr.Logger
}

// Keeper creates, shares, rotates and installs the webhook's certificates.
type Keeper struct{ o Options }

// New returns a Keeper with defaults filled in.
func New(o Options) *Keeper {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.ServingValidity == 0 {
		o.ServingValidity = DefaultServingValidity
	}
	if o.RenewFraction == 0 {
		o.RenewFraction = DefaultRenewFraction
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	return &Keeper{o: o}
}

// DNSNames are the names the apiserver uses to reach the Service.
func (k *Keeper) DNSNames() []string {
	svc, ns := k.o.ServiceName, k.o.Namespace
	return []string{svc + "." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc.cluster.local"}
}

// NeedLeaderElection is false: every replica needs the files.
func (k *Keeper) NeedLeaderElection() bool { return false }

// Start re-checks every CheckInterval until ctx ends. Call Ensure once
// before starting the webhook server: it needs the files to start.
func (k *Keeper) Start(ctx context.Context) error {
	t := time.NewTicker(k.o.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := k.Ensure(ctx); err != nil {
				k.o.Log.Error(err, "keeping the webhook certificate; retrying at the next check")
			}
		}
	}
}

// Ensure brings the Secret, the files and the caBundle up to date.
func (k *Keeper) Ensure(ctx context.Context) error {
	b, err := k.ensureSecret(ctx)
	if err != nil {
		return err
	}
	if err := k.writeFiles(b); err != nil {
		return err
	}
	return k.patchCABundle(ctx, b.caBundle)
}

// ensureSecret returns a current bundle from the Secret, creating or
// renewing it as needed. Replicas race through optimistic concurrency:
// whoever loses a create or update reads the winner's Secret and uses it.
func (k *Keeper) ensureSecret(ctx context.Context) (*bundle, error) {
	key := types.NamespacedName{Namespace: k.o.Namespace, Name: k.o.SecretName}
	for attempt := 0; attempt < 5; attempt++ {
		secret := &corev1.Secret{}
		err := k.o.Client.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			b, err := k.renew(nil)
			if err != nil {
				return nil, err
			}
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "scw-lb-ipam"}},
				Type: corev1.SecretTypeTLS,
				Data: b.data(),
			}
			if err := k.o.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
				continue // another replica was first: use its Secret
			} else if err != nil {
				return nil, fmt.Errorf("creating Secret %s: %w", key, err)
			}
			k.o.Log.Info("created the webhook certificate", "secret", key.String())
			return b, nil
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		current := bundleFrom(secret.Data)
		if !k.stale(current) {
			return current, nil
		}
		b, err := k.renew(current)
		if err != nil {
			return nil, err
		}
		secret.Data = b.data()
		if err := k.o.Client.Update(ctx, secret); apierrors.IsConflict(err) {
			continue // another replica renewed it meanwhile
		} else if err != nil {
			return nil, fmt.Errorf("updating Secret %s: %w", key, err)
		}
		k.o.Log.Info("renewed the webhook certificate", "secret", key.String())
		return b, nil
	}
	return nil, fmt.Errorf("the Secret %s kept changing under five attempts to read it", key)
}

// stale reports a bundle that must be renewed.
func (k *Keeper) stale(b *bundle) bool {
	now := k.o.Clock.Now()
	return needsRenewal(b.caCert, now, k.o.RenewFraction) ||
		needsRenewal(b.tlsCert, now, k.o.RenewFraction) ||
		!servesNames(b, k.DNSNames()) || len(b.caBundle) == 0
}

// renew makes a new serving certificate, and a new CA first when the old
// one is missing or near its end; the old CA stays trusted while valid.
func (k *Keeper) renew(old *bundle) (*bundle, error) {
	now := k.o.Clock.Now()
	b := &bundle{}
	if old != nil && !needsRenewal(old.caCert, now, k.o.RenewFraction) {
		if _, err := parseKey(old.caKey); err == nil {
			b.caCert, b.caKey = old.caCert, old.caKey
		}
	}
	if b.caCert == nil {
		var err error
		if b.caCert, b.caKey, err = newCA(now, k.o.CAValidity); err != nil {
			return nil, fmt.Errorf("creating a CA: %w", err)
		}
	}
	var oldCA []byte
	if old != nil {
		oldCA = old.caCert
	}
	b.caBundle = trustBundle(b.caCert, oldCA, now)
	var err error
	if b.tlsCert, b.tlsKey, err = newServing(now, k.o.ServingValidity, k.DNSNames(), b.caCert, b.caKey); err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	return b, nil
}

// writeFiles replaces tls.crt and tls.key when they differ, each through a
// rename so the server never reads half a file.
func (k *Keeper) writeFiles(b *bundle) error {
	if err := os.MkdirAll(k.o.CertDir, 0o700); err != nil {
		return err
	}
	for name, content := range map[string][]byte{"tls.key": b.tlsKey, "tls.crt": b.tlsCert} {
		path := filepath.Join(k.o.CertDir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, content) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, content, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

// patchCABundle sets the caBundle of every webhook of the configuration.
// The optimistic lock turns a concurrent change (another replica, a Helm
// upgrade) into a conflict, retried on a fresh read, instead of a lost write.
func (k *Keeper) patchCABundle(ctx context.Context, caBundle []byte) error {
	if k.o.WebhookConfigName == "" {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := k.o.Client.Get(ctx, client.ObjectKey{Name: k.o.WebhookConfigName}, cfg); err != nil {
			return err
		}
		base := cfg.DeepCopy()
		changed := false
		for i := range cfg.Webhooks {
			if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, caBundle) {
				cfg.Webhooks[i].ClientConfig.CABundle = caBundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if err := k.o.Client.Patch(ctx, cfg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		k.o.Log.Info("patched the webhook configuration's caBundle", "configuration", k.o.WebhookConfigName)
		return nil
	})
	if err != nil {
		return fmt.Errorf("patching the caBundle of MutatingWebhookConfiguration %s: %w", k.o.WebhookConfigName, err)
	}
	return nil
}
