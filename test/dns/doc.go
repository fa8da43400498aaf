// Package dns proves that the datacenter's DNS names a Load Balancer by
// its reserved address: the real external-dns (v0.22.0, built by make
// tools) with its rfc2136 provider publishes the Services of a real
// kube-apiserver and etcd, with the webhook replicas, the CCM and the
// Scaleway emulator of test/testenv, into a real DNS server, named
// from Debian's bind9 (make tools), which the suite starts on a loopback
// port with a TSIG key and a zone in a temporary directory.
//
// A Service on a pool whose Private Network is not the nodes' gets a Load
// Balancer with two addresses, the reserved one and a DHCP one on the
// nodes' network that changes on every re-create; the status lists both.
// The scenarios check that the name resolves to the reserved address
// only, that a re-create within the pool's retention resolves to the same
// address, that deleting the Service removes the name, the same under
// either prefix (external-dns v0.22 reads one: its own by default, the
// older one most manifests use when --annotation-prefix names it), that the
// convergence monitor's IPNotApplied Event says DNS points at the reserved
// address when a CCM older than v0.36.0 leaves it unattached, and, as the
// negative control, that with the pool file's dnsTarget: false external-dns
// publishes both addresses.
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package dns
