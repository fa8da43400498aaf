// Package neighbours holds what the CCM's neighbours write on a Service:
// the requests of other load-balancer implementations and clouds (MetalLB,
// Cilium, Calico, kube-vip, AWS, Azure), which package request translates
// into this project's own; the labels a Gateway controller writes with its
// Gateway's namespace; and external-dns' annotation prefixes, with whether
// it publishes a Service's name at its reserved addresses.
//
// It imports package ccm only (the one reading of a written list).
package neighbours
