// Package sweeper releases IPAM reservations that no live Service
// references any more, after the pool's retention and only once the Load
// Balancer has let go of them. It keeps the ledger's orphaned-since and uid
// tags up to date and runs on the elected leader only. From the same
// listing, it also watches whether the CCM applied each live Service's
// reserved IPs (converge.go), and reports those that stay unapplied past a
// grace.
//
// Sweep (sweep.go) reads the live Services and pages through the listing;
// the cycle (cycle.go) carries out, for each listed IP, what the rules
// decide of it (ipam.Retention.Judge for one no live Service references),
// then releases what is due. The leader's loop is sweeper.go, its election
// leader.go; the convergence monitor converge.go and its Events note.go;
// the back-fill of a new Service's ledger backfill.go.
//
// It owns the release half of the ledger and its own leader election (a
// lost lease costs some cycles, never the webhook), and is set up in a
// manager by SetupWithManager. It reads what a Service asks for from
// request (by the webhook's own rules, for its report of Services that hold
// no reservation), the Service side of the CCM's contract from ccm, and the
// ledger, the release protocol and the Scaleway view from ipam and
// ipam/scaleway; it must not import the webhook (the two share only what
// lies below them) or anything under internal/. It sits at the top level
// beside the webhook, not under ipam: like the webhook it reads requests,
// a layer above ipam's rules.
package sweeper
