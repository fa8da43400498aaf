// Package claims makes "one Service per bring-your-own IPAM ID" hold across
// replicas: one Lease per ID in the release namespace, created by the
// allocator when it validates the ID (it implements allocator.Claims) and
// collected by the sweeper once the Service no longer uses it.
//
// It is the allocator's and the sweeper's, never the webhook's: the webhook
// reaches it only through ipam. It reads the Service side of the contract
// from ccm.
package claims
