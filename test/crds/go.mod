// Pins the third-party CustomResourceDefinitions the chart's objects need on
// the test apiserver: cert-manager's (Certificate, Issuer) and
// prometheus-operator's ServiceMonitor and PrometheusRule. `make crds` copies
// them into bin/crds.
module github.com/scw-lb-ipam/scw-lb-ipam/test/crds

go 1.26.0

require (
	github.com/cert-manager/cert-manager v1.21.2
	github.com/prometheus-operator/prometheus-operator v0.85.0
)
