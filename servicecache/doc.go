// Package servicecache is what this process holds of every Service: the
// Record (the fields the webhook, the allocator and the sweeper read,
// interned so that 10,000 Services stay small), the one Service informer
// that holds Records, and its index that answers "which live Services
// reference this IPAM ID" (Records, the allocator's References).
//
// A Record keeps the CCM's annotations (package ccm), this project's own,
// and the requests written in the CCM's neighbours' words (package
// neighbours), so that the sweeper reads a request as admission does. It
// imports those two packages only.
package servicecache
