// Package chaos runs mixed Service operations from concurrent clients on a
// real control plane while the Scaleway emulator injects faults, then checks
// the design's six invariants from the emulator's audit log and the
// apiserver's state. CHAOS_OPS, CHAOS_CLIENTS and CHAOS_SEED size and replay
// a run; make test runs a short one, make chaos the full one. CHAOS_DEBUG=<file>
// keeps the replicas' logs in that file and prints each create that got a
// fresh IP instead of its earlier reservation.
//
// A suite: only its tests import, and only internal/testenv and the layers
// below.
package chaos
