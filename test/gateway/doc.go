// Package gateway runs Envoy Gateway's real controller (bin/envoy-gateway,
// built from the module proxy by make tools) out of cluster against a real
// kube-apiserver and etcd with the webhook replicas, the Scaleway CCM and
// the Scaleway emulator of test/testenv, and checks that a Gateway
// asking for a pool in spec.infrastructure.annotations gets its address:
// in both deploy modes (the Service in the controller's namespace, judged
// by the Gateway's namespace through the pool file's gatewayControllers;
// and GatewayNamespace, the Service beside its Gateway), through the
// controller's own server-side re-applies and a Gateway re-create, with
// the negative control of a Gateway in a namespace the pool does not
// allow.
//
// The controller reads its xDS and webhook certificates from the
// hard-coded /certs, and in GatewayNamespace mode a service account from
// the in-cluster path: testdata/private-root.sh runs it in a private mount
// namespace whose root mirrors the host's plus those two directories, bound
// from the test's temporary directory, so nothing is written on the host.
// Needs root (unshare, mount, chroot).
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package gateway
