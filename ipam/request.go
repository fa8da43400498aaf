package ipam

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
)

// Request is one reservation to make: an address from one pool for one
// Service.
type Request struct {
	Pool    *Pool
	Service types.NamespacedName
	// Namespace is the namespace whose share the reservation counts in,
	// when not the Service's: a Gateway's Service in a controller's
	// namespace counts in its Gateway's (request.JudgedNamespace).
	Namespace string
	// Address is the specific address asked for; zero lets the pool choose.
	Address netip.Addr
	// DryRun validates and predicts without booking or re-tagging anything.
	DryRun bool
	// Own are the IDs the Service references now (an UPDATE): they are its
	// own, attached to its own Load Balancer, and may be kept.
	Own []string
}

// JudgedNamespace is the namespace the request is judged by: its pools
// and the share it counts in.
func (r Request) JudgedNamespace() string {
	if r.Namespace != "" {
		return r.Namespace
	}
	return r.Service.Namespace
}

// Grant is what a request was given: an IP reserved (or validated) for a
// Service.
type Grant struct {
	ID               string
	Address          netip.Addr // zero in a dry run where IPAM would choose
	Pool             string
	PrivateNetworkID string
	// Reused: an earlier reservation of the same Service and pool was
	// taken back (the sticky path).
	Reused bool
	// AdoptedFrom is the cluster a reused reservation was taken over from
	// (the pool's adoptFrom); empty when it was this cluster's.
	AdoptedFrom string
	// Booked: this call booked the IP. The caller releases it when the rest
	// of the admission fails, so nothing leaks until the sweeper's grace.
	Booked bool
	// BringYourOwn: the ID was reserved outside this project; never released.
	BringYourOwn bool
}

// IDRequest is an IPAM ID a Service brings: scw-lb-ipam.io/ipam-ids, or a
// private-ip-ids written by hand or restored from a manifest.
type IDRequest struct {
	ID      string
	Service types.NamespacedName
	// Namespace is the namespace the ID's pool must allow, when not the
	// Service's: a Gateway's Service in a controller's namespace is judged
	// by its Gateway's (request.JudgedNamespace).
	Namespace string
	DryRun    bool
	// Own are the IDs the Service references now (an UPDATE).
	Own []string
}

// JudgedNamespace is the namespace the request is judged by: the ID's
// pool must allow it.
func (r IDRequest) JudgedNamespace() string {
	if r.Namespace != "" {
		return r.Namespace
	}
	return r.Service.Namespace
}
