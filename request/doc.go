// Package request is what a Service asks scw-lb-ipam for: this project's
// own label and annotations, the strict parsing of the annotations
// (ask.go), other implementations' request words read as this project's
// (foreign.go), the namespace a Gateway's Service is judged by
// (gateway.go), external-dns's target (dns.go), and the plan that resolves
// them against the pool file (plan.go). contract.go checks what an
// admission writes against the CCM's contract (package ccm): pn-ids as the
// CCM reads it, one IP per Private Network, the network limit, and the
// warnings of what the CCM will do.
//
// Both the webhook, which reserves what a Service asks for, and the
// sweeper, which reports the Services that ask and hold nothing
// (Unreserved), import it: the two read a request by the same rules. It
// sits above ccm (the CCM's own annotations), neighbours (other
// implementations' words), servicecache and ipam (pools), and must not
// import the webhook, the sweeper or anything under internal/.
package request
