// Command scw-lb-ipam reserves stable private IPs for Scaleway Load
// Balancers. "serve" runs the admission webhook (and, on the leader, the
// sweeper) next to the Scaleway cloud-controller-manager.
//
// main parses the subcommand and hands it to internal/app (options, then
// one Setup…WithManager per concern); it imports only internal/app and
// internal/version.
package main
