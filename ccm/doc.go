// Package ccm is the contract between scw-lb-ipam and the Scaleway
// cloud-controller-manager (CCM), as the CCM reads it on a Service: the
// CCM's annotations scw-lb-ipam reads or writes, the CCM's marks of a Load
// Balancer that exists (its ID annotation and the cleanup finalizer), which
// IPAM IDs a Service hands to the CCM, and whether it is live. It also owns
// what this process holds of every Service: the Record, the one Service
// informer that holds Records, and its index that answers "which live
// Services reference this IPAM ID", which the webhook and the sweeper both
// rely on. The Record also keeps the requests written in other
// load-balancer implementations' words (words.go), which package request
// translates, and a Gateway controller's label with its Gateway's
// namespace. This project's own annotations are in package request.
//
// It is the lowest layer the webhook and the sweeper share. It must not
// import any other package of this module: it is pure knowledge of the
// Service object, built on the Kubernetes API types and client-go only.
package ccm
