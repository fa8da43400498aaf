// Package certs keeps the webhook's serving certificate when cert-manager is
// not installed: a CA and a serving certificate in a Secret, rotated before
// expiry, with the caBundle patched into the webhook configuration.
package certs
