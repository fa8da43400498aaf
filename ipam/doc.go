// Package ipam turns pool requests into Scaleway IPAM reservations and keeps
// their ledger.
//
// It holds the pool file (config.go: its format and validation; pool.go:
// the pool model the allocator reads; resolve.go: the check against the
// live Private Networks), the tag ledger that marks every reservation with
// its cluster, pool and Service, and what the allocator hands out from it
// (ledger.go: Entry, Reservation, Holder), the release protocol shared with
// the sweeper (Retention), the Inventory — what one replica knows without a
// call: each subnet's occupancy view (occupancy.go, stats.go), the index of
// this cluster's reservations (index.go) and the IDs the Service cache
// showed, with all the locking — and the Allocator, which decides: it
// books (allocator.go), reuses (sticky.go) or validates (validate.go) IPs
// from what the Inventory knows, which only chooses what to re-read or pick.
// IPAM is the only source of truth: nothing here persists state of its
// own.
//
// It talks to Scaleway only through ipam/scaleway's Cloud and does address
// arithmetic only through ipam/addrspace. It must not import the webhook,
// the sweeper, the CCM contract or anything Kubernetes beyond API machinery
// types: admission and Services are the layers above.
package ipam
