// Package chaos runs mixed Service operations from concurrent clients on a
// real control plane while the Scaleway emulator injects faults, Load
// Balancers are deleted late (as Scaleway's) and two replicas of the real
// Scaleway CCM run with leader election (the leader killed once), then checks the design's eight invariants from the emulator's
// audit log and the apiserver's state, and that the sweeper's leader never
// ran more cycles than its interval and triggers account for. CHAOS_OPS,
// CHAOS_CLIENTS and CHAOS_SEED size and replay a run, CHAOS_LB_DELETE_DELAY
// sets how long a deleted Load Balancer holds its IPs; make test runs a
// short one, make chaos the full one. CHAOS_DEBUG=<file> keeps the
// replicas' logs in that file and the clients' operations in
// <file>.journal, and prints each create that did not get its previous
// address back.
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package chaos
