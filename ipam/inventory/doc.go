// Package inventory is what one replica knows of the pools without asking
// Scaleway: each subnet's occupancy view, with the hot path of a booking —
// the candidates to re-read for a Service, a free address to pick, the
// booking recorded — beside the views it reads (occupancy.go); the index
// of this cluster's reservations (index.go); the IDs the Service cache
// showed on Services (sightings.go); who holds a pool's addresses
// (holders.go); the releases brought forward for requests in full pools
// (asked.go); the pools' stats (report.go). Start and Refresh keep it
// listed (refresh.go); Resolve reads the pool file's Private Networks
// (resolve.go).
//
// It owns every lock of that state and holds none across a Scaleway call.
// It answers intent-named questions and records what the allocator wrote;
// it decides nothing and words no refusal: the rules are package ipam's,
// the decisions ipam/allocator's. It imports ipam, ipam/scaleway and
// ipam/addrspace only.
package inventory
