// Package app wires scw-lb-ipam's components into a controller-runtime
// manager: the Service webhook on every replica, the sweeper on the leader,
// pool-file reloads, metrics and health checks. The command and the
// integration suites both start it through Serve.
package app
