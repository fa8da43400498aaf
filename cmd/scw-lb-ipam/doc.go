// Command scw-lb-ipam reserves stable private IPs for Scaleway Load
// Balancers. "serve" runs the admission webhook (and, on the leader, the
// sweeper) next to the Scaleway cloud-controller-manager.
package main
