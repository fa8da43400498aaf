// Package playground runs scw-lb-ipam on a laptop with nothing from
// Scaleway: a real kube-apiserver and etcd (built by make tools), the
// Scaleway emulator seeded from a pool file, and the webhook and sweeper as
// the chart installs them, in self-managed TLS mode. `make run` starts it.
//
// It owns the walkthrough's seeding and banner. It sits above the test
// environment and the wiring (internal/testenv, internal/app), which it
// drives; only cmd/scw-playground imports it.
package playground
