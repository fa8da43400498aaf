// Package testenv starts what the suites on a real control plane share:
// kube-apiserver and etcd from bin/ (make tools), the chart's rendered
// MutatingWebhookConfiguration, the Scaleway emulator, and scw-lb-ipam
// itself through internal/app, in process.
package testenv
