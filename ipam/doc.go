// Package ipam is the model and the pure rules of scw-lb-ipam: what the
// allocator and the sweeper agree on, decided from their inputs alone.
//
// It holds the pool file (config.go: its format and validation; pool.go:
// the pool model; resolve.go: its check against the Private Networks
// ipam/inventory read; services.go: its switches of how Services are read
// and written, and the Gateway controllers' namespaces), the tag ledger that
// marks every reservation with its cluster, pool, Service and namespace
// (ledger.go: Entry), a reservation as read, its ledger parsed once where
// it enters the process (reservation.go: Reservation, Read), the request
// and grant types (request.go), the release protocol shared with the
// sweeper (retention.go: Retention; verdict.go: the sweeper's verdict),
// whether a re-created Service gets its address back (takeback.go:
// TakesBack, Reusable, Adoptable, HeldByPrevious, Preference), who yields
// in a full pool or a namespace's share and what the request is told
// (fullpool.go: Yieldable, Classify, Full), a hand-over's candidates (handover.go) and every refusal's text
// (refusal.go). IPAM is the only source of truth: nothing here persists
// state of its own, and no rule takes a lock or calls Scaleway; each has
// table tests that take inputs and return verdicts.
//
// What one replica knows is ipam/inventory; what it does, ipam/allocator.
// It must not import them, the webhook, the sweeper, the CCM contract or
// anything Kubernetes beyond API machinery types.
package ipam
