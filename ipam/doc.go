// Package ipam turns pool requests into Scaleway IPAM reservations and keeps
// their ledger.
//
// It holds the pool file (Config, Pool), the narrow view of Scaleway the rest
// of the project uses (Cloud, implemented on scaleway-sdk-go with bounded
// retries), the tag ledger that marks every reservation with its cluster, pool
// and Service, and the Allocator that reuses, books or validates IPs. IPAM is
// the only source of truth: nothing here persists state of its own.
package ipam
