// Package bench measures scw-lb-ipam on a real control plane and prints one
// table (make bench): Scaleway calls per admission, Service-create latency
// with and without the webhook, a burst of concurrent creates, a sweeper
// cycle over 10,000 reservations, and the free-address pick on a /16.
//
// A suite: only its tests import, and only internal/testenv and the layers
// below.
package bench
