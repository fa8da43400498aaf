// Package certs keeps the webhook's serving certificate when cert-manager is
// not installed. A CA and a serving certificate live in one Secret, created
// by whichever replica comes first and shared through optimistic concurrency;
// each replica writes them to its certificate directory (the webhook server
// reloads them), rotates them before expiry, and patches the CA bundle into
// the MutatingWebhookConfiguration.
//
// It owns the Secret, the certificate files and the caBundle, and is set up
// in a manager by SetupWithManager. It must not import any other package of
// this module: TLS knows nothing of pools or Services.
package certs
