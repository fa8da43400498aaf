// Package webhook is the mutating admission webhook for Services: it turns
// scw-lb-ipam annotations into IPAM reservations and writes the CCM's
// annotations.
//
// It owns admission decisions: the UPDATE rules, the reservations of one
// admission, the denials and warnings, and its metrics; SetupWithManager
// serves it in a manager. It reads what a Service asks for from request,
// the Service side of the CCM's contract from ccm, and reserves through
// ipam; it must not import the sweeper or anything under internal/.
package webhook
