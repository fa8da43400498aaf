// Package emulator is an in-memory emulator of the parts of the
// Scaleway API the project and the real Scaleway cloud-controller-manager use
// (IPAM v1, VPC v2, Account v3 projects, Load Balancer v1 zoned: Load
// Balancers, their flexible IPs, frontends, ACLs, backends and Private
// Networks; /metadata), served over real HTTP so that the real
// scaleway-sdk-go client can talk to it. It lives under test/ because
// nothing that ships needs it: the suites, the benchmarks and `make run`
// (cmd/scw-emulator, the playground) do.
//
// Unit tests, benchmarks and the local playground (cmd/scw-emulator) share it:
// it answers with the status codes, JSON shapes and error bodies of the real
// API (checked against recorded traffic by the fidelity test), keeps
// per-operation call counts, a request log and an audit log of state changes,
// and injects latency and faults on demand.
//
// One type per emulated API holds the handlers of its calls and its Go API:
// ipamAPI (ipam*.go), vpcAPI (vpc*.go), accountAPI (account.go), and for
// Load Balancers lbAPI (lb.go, lb_attach.go, lb_update.go, lb_inspect.go),
// lbIPAPI (lb_ip.go), frontendAPI (lb_frontend.go, lb_acl.go) and
// backendAPI (lb_backend.go, lb_healthcheck.go). Each points to the cloud
// (cloud.go), the state they share:
// the objects, the lock over them, the clock and the audit log, with the
// changes of IPs more than one API makes (ipam_book.go). The router
// (routes.go) dispatches each call to its API's handler; Server (server.go)
// serves, after the fault plan (faults.go), and logs the call (traffic.go).
// Server embeds the parts whose methods callers use.
//
// It must not import any other package of this module, the client it fakes
// (ipam/scaleway) included: it checks the project from the outside, as the
// real API would. The shipped binary links none of it (internal/archtest).
package emulator
