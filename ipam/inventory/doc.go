// Package inventory is what one replica knows of the pools without asking
// Scaleway: each subnet's occupancy view and the index of this cluster's
// reservations (occupancy.go, index.go), the IDs the Service cache showed on
// Services (sightings.go), the releases brought forward for requests in
// full pools (asked.go), and the pools' stats (report.go). Start and
// Refresh keep it listed (refresh.go).
//
// It owns every lock of that state and holds none across a Scaleway call.
// It answers intent-named questions — the candidates to re-read for a
// Service, who holds a pool, a free address to book (pick.go) — and records
// what the allocator wrote; it decides nothing and words no refusal: the
// rules are package ipam's, the decisions ipam/allocator's. It imports ipam,
// ipam/scaleway and ipam/addrspace only.
package inventory
