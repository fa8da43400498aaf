// Package request is what a Service asks scw-lb-ipam for: this project's
// own label and annotations, their strict parsing (Parse), and the plan
// that resolves them against the pool file (NewPlan), with the rules of the
// CCM's contract a plan must keep.
//
// Both the webhook, which reserves what a Service asks for, and the
// sweeper, which reports the Services that ask and hold nothing
// (Unreserved), import it: the two read a request by the same rules. It
// sits above ccm (the CCM's own annotations) and ipam (pools), and must not
// import the webhook, the sweeper or anything under internal/.
package request
