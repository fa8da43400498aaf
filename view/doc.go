// Package view shows the ledger where Kubernetes users look, and is never
// read back as a source of truth: the IPAM ledger stays that.
//
//   - Two conditions on each Service that references IPAM IDs,
//     scw-lb-ipam.io/Reserved (its reservations exist and their ledger
//     names it) and scw-lb-ipam.io/Applied (the CCM attached them and, where
//     it lists private addresses, lists them in the status), written
//     through the status subresource (conditions.go).
//   - IPPool (cluster-scoped) and IPReservation (in the namespace a
//     reservation counts in) objects of the API group scw-lb-ipam.io,
//     read-only to everyone but the release (objects.go).
//
// The sweeper's leader hands each cycle's Snapshot to a Mirror
// (mirror.go), which writes only what differs from what the apiserver
// holds: an idle cycle writes nothing, a leader's first cycle one write per
// object that changed while no leader wrote. Nothing here calls Scaleway:
// the reservations come from the cycle's own listing, the pools' counts
// from the inventory's (what the metrics and `status` read).
package view
