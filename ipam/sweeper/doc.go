// Package sweeper releases IPAM reservations that no live Service
// references any more, after the pool's retention and only once the Load
// Balancer has let go of them. It keeps the ledger's orphaned-since and uid
// tags up to date and runs on the elected leader only.
package sweeper
