// Package ccm is the contract between scw-lb-ipam and the Scaleway
// cloud-controller-manager (CCM), as the CCM reads it on a Service: the
// CCM's annotations scw-lb-ipam reads or writes and how the CCM reads
// their values (Flag, Items), the CCM's marks of a Load Balancer that
// exists (its ID annotation and the cleanup finalizer), whether the CCM
// serves a Service at all (Served), which IPAM IDs a Service hands to it,
// and whether it is live. Each of these facts is decided here once, the way
// the CCM's own code decides it; the webhook, the sweeper and status ask.
// This project's own annotations are in package request.
//
// It is the lowest layer the webhook and the sweeper share. It must not
// import any other package of this module: it is pure knowledge of the
// Service object, built on the Kubernetes API types only.
package ccm
