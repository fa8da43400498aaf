// Package playground runs scw-lb-ipam on a laptop with nothing from
// Scaleway: a real kube-apiserver and etcd (built by make tools), the
// Scaleway emulator seeded from a pool file, and the webhook and sweeper as
// the chart installs them, in self-managed TLS mode. `make run` starts it.
//
// It owns the walkthrough's seeding and banner. It sits above the test
// environment and the wiring (test/testenv, internal/app), which it drives;
// only cmd/scw-playground imports it.
//
// Its suite (playground_test.go) builds cmd/scw-playground and
// cmd/scw-lb-ipam, starts the playground as a newcomer would, walks the
// transcript of README.md and docs/development.md (apply the example
// Service, read its annotations and the warning, run status), then presses
// Ctrl-C and checks that no process or temporary file is left.
package playground
