// Package app is scw-lb-ipam's command line: the options of "serve",
// "status" and "preflight", validated before anything starts, Preflight's
// checks of an install (what helm test runs), and Serve: New sets up one
// concern at a time in a controller-runtime manager through each one's own
// Setup…WithManager — certs, inventory, webhook, sweeper — from that
// component's own Options (the flags are bound straight into them), plus
// the pool-file reload and the metrics, which live here; Start runs it.
// The command serves through Serve; the test environment calls New, reads
// what was built, and Start.
//
// It is the top of the import graph below the commands: nothing in the
// project imports it but cmd/scw-lb-ipam and the test environment.
package app
