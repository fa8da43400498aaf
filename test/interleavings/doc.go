// Package interleavings holds the proofs that an admission (the allocator)
// and the sweeper, running at once against the same reservation, keep the
// release protocol's promise in every order their Scaleway calls can take:
// no IP handed to a Service, or referenced by a live one, is released
// (invariant 2), and the protocol is not vacuous (some orders take the IP
// back, others release it). The races proved: a release against a
// re-create's take-back, inside the retention, inside the margin and once
// due, whether the admission reads by listing or by its index
// (TestReleaseProtocolEveryInterleaving); a rewrite of the release time
// against a take-back (TestRewriteAndTakeBackEveryInterleaving); a release
// a full pool brought forward against the re-create and its retry
// (TestEarlyReleaseEveryInterleaving); another cluster's adoption and its
// handover against prod's release (TestAdoptionAndTheOtherClusters…,
// TestHandoverAndTheOtherClusters…); and the sweeper's re-read before a
// write or a release (TestCycleWritesNoTagsOfAnAdoptedIP,
// TestReleaseSkippedWhenTagsChanged).
//
// The tests drive only the exported APIs, as internal/app wires them:
// sweeper.New and Sweep, allocator.New, Reserve and Handover, over cluster
// prod (fixtures.ProdWorld). The seam is scaleway.Cloud: each party calls
// Scaleway through a gatedCloud that holds its GetIP, ListIPs, SetTags,
// ReleaseIP (and, through bookingCloud, BookIP) until a schedule lets it
// through. A schedule is a list of steps "<party>:<op>", run in that
// order; a call no step names goes through at once, and a party that ends
// without making its remaining steps has them skipped.
//
// To add an order: name each party's calls in its own order, and let
// orders give every interleaving of two parties' steps (newSchedule takes
// one fixed order as well); build each party on a gatedCloud of its name
// and the schedule, run them at once (run, or race for a sweep and a
// Reserve), then assert on what each returned, on s.made (the steps made,
// in order) and on the ledger (World.Entry, World.Exists). A new party's
// Scaleway call that the schedule must order needs its method on
// gatedCloud.
//
// The package has no code of its own and needs no control plane: make unit
// runs it.
package interleavings
