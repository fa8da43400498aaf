// Package clients drives scw-lb-ipam with the clients users run, as they
// run them: the real kubectl (client-side apply, server-side apply as Argo
// CD does, replace, replace --force) and Helm 4 (server-side apply by
// default), built from the pinned modules by make tools, against a real
// kube-apiserver and etcd with the webhook replicas, the real Scaleway CCM
// and the Scaleway emulator of test/testenv. Each scenario checks what
// the Load Balancer sees: the same address and IPAM IDs, pn-ids still
// listing the pool's network, external-dns's target still the reserved
// address, no attach or detach by the CCM on a re-apply, and a re-created
// Service's new Load Balancer ending on its old address, also when the old
// one is deleted late.
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package clients
