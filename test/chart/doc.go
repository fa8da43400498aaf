// Package chart tests the Helm chart with the helm CLI built by make tools:
// lint, rendering of every mode and option, schema rejections, server-side
// dry-run of every rendered object on a real kube-apiserver, and the
// self-managed TLS mode end to end with the binary started from the chart's
// own arguments.
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package chart
