// Package testenv starts what the suites on a real control plane share:
// kube-apiserver and etcd from bin/ (make tools), the chart's rendered
// MutatingWebhookConfiguration, the Scaleway emulator, and scw-lb-ipam
// itself through internal/app, in process.
//
// StartControlPlane is the one bootstrap of kube-apiserver and etcd, which
// Start, the chart suite and the playground use alike. Start adds the
// webhook replicas and the reads of their metrics (Observer). It imports
// internal/app, the emulator, the CCM stand-in and the shared fixtures;
// nothing the binary ships imports it.
package testenv
