// Package cloudcontroller stands in for the Scaleway cloud-controller-manager
// (CCM) next to the suites, where the real one cannot run: it acts on
// LoadBalancer Services as the cloud-provider service controller and the
// CCM's scaleway/loadbalancers.go do, through the real scaleway-sdk-go and
// the emulator's Load Balancer and IPAM APIs.
//
// Same calls and same writes to the Service: the cleanup finalizer first,
// CreateLB named after the Service's UID, a patch adding
// scw-loadbalancer-id, ListLBPrivateNetworks then IPAM
// ListIPs(private_network_id, ip_ids) per network, DetachPrivateNetwork
// before re-attaching with other IDs, AttachPrivateNetwork{ipam_ids}, the
// status from the IPs attached to the Load Balancer; on deletion a patch
// removing scw-loadbalancer-id, DeleteLB, then the finalizer removed at once,
// while the Load Balancer may still be to_delete with its IPs attached. It
// reads pn-ids and private-ip-ids as the CCM does: split on commas, nothing
// trimmed, no zone stripped. Same timing hazards: each step waits a
// configurable delay, so a deleted Service stays Terminating with its IP
// attached for a while, and a failed sync (an attach refused while the
// previous Load Balancer still holds the IP) is retried with the service
// controller's backoff, 5 s doubling up to 300 s. Options.IgnorePrivateIPIDs
// makes it a CCM older than v0.36.0, which attaches every network with DHCP.
// It must not import the
// project's own packages: it checks them, it does not share their reading
// of the annotations.
package cloudcontroller
