// Package app is scw-lb-ipam's command line: the options of "serve",
// "status" and "preflight", validated before anything starts, Preflight's
// checks of an install (what helm test runs), and Serve, which sets up one
// concern at a time in a controller-runtime manager through each one's own
// Setup…WithManager — certs, webhook, sweeper — plus the pool-file reload
// and the metrics, which live here. The command and the suites both start
// it through Serve.
//
// It is the top of the import graph below the commands: nothing in the
// project imports it but cmd/scw-lb-ipam and the test environment.
package app
