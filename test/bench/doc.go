// Package bench measures scw-lb-ipam on a real control plane and prints one
// table (make bench), each goal marked met or missed: Scaleway calls per
// admission (full pools of retained reservations and a share beside 10,000
// reservations of other namespaces among them), Service-create latency
// without a webhook, with a no-op one on the same serving path, with no-ops
// that wait as long as ours' calls (one of them also answering with a
// patch of ours' shape) and with ours (and the overheads between them), a
// burst of concurrent creates without a webhook, with the no-op and with
// ours, the sweeper's calls per create of a burst beside 1,000 and 10,000
// reservations, sweeper cycles over 10,000 and 100,000 reservations in a
// child process, and the free-address pick on a /16.
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package bench
