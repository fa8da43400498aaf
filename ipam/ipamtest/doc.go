// Package ipamtest is an in-memory emulator of the parts of the Scaleway API
// the project uses (IPAM v1, VPC v2, Account v3 projects, Load Balancer v1
// zoned Load Balancers and their Private Networks, /metadata), served over
// real HTTP so that the real scaleway-sdk-go client can talk to it.
//
// Unit tests, benchmarks and the local playground (cmd/scw-emulator) share it:
// it answers with the status codes, JSON shapes and error bodies of the real
// API (checked against recorded traffic by the fidelity test), keeps
// per-operation call counts, a request log and an audit log of state changes,
// and injects latency and faults on demand.
//
// It must not import any other package of this module: it checks the
// project from the outside, as the real API would. Nothing the binary ships
// imports it.
package ipamtest
