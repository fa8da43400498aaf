// Package webhook is the mutating admission webhook for Services: it turns
// scw-lb-ipam annotations into IPAM reservations and writes the CCM's
// annotations.
package webhook
