// Package oldccm is a fake of the Scaleway cloud-controller-manager before
// v0.36.0 (v0.35.x and its release-0.35 branch), for the one scenario that
// needs what a cluster with such a CCM shows: the convergence monitor's
// "CCM older than v0.36.0" (test/integration, through
// testenv.Env.RunOldCCM). Every other test world runs the real CCM
// (test/ccmprocess); v0.35 is not built here.
//
// What it does is what v0.35 does to a LoadBalancer Service, through the
// real scaleway-sdk-go and the emulator's Load Balancer API: the cleanup
// finalizer, CreateLB named after the Service's UID, a patch adding
// scw-loadbalancer-id, the Private Networks of pn-ids (the cluster's when
// it names none) attached with DHCP, since v0.35 has no private-ip-ids and
// compares network IDs only, the status from the IPs attached to the Load
// Balancer; on deletion a patch removing scw-loadbalancer-id, DeleteLB, and
// the finalizer removed at once. Each step waits Options.Delay; a failed
// sync is retried with the service controller's backoff, 5 s doubling up
// to 300 s. It must not import the project's own packages: it checks them,
// it does not share their reading of the annotations.
package oldccm
