// Package allocator is what one replica does for a request: it reads what
// the inventory knows and what Scaleway answers, asks package ipam's rules,
// and writes.
//
// Reserve reads top-down (allocator.go): the request's address against its
// pool, the Service's own reservation found and taken back (sticky.go,
// under the rules of ipam's takeback.go), the pool's policy, the namespace's share (share.go), the
// booking (book.go), a full pool making room (yield.go), and the share
// confirmed. ValidateID checks a brought IPAM ID (validate.go); Handover
// moves another cluster's retained reservations (handover.go). The parts
// share one set of dependencies (deps) and hold no state and no lock of
// their own: what must be remembered between admissions is the
// inventory's.
package allocator
