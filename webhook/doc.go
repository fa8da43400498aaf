// Package webhook is the mutating admission webhook for Services: it turns
// scw-lb-ipam annotations into IPAM reservations and writes the CCM's
// annotations.
//
// It owns admission decisions: parsing a Service's request, the plan per
// pool, the UPDATE rules, the denials and
// warnings, and its metrics; SetupWithManager serves it in a manager. It
// reads the Service side of the contract from ccm and reserves through
// ipam; it must not import the sweeper or anything under internal/.
package webhook
