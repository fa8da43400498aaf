package neighbours

import (
	"slices"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
)

// addressesAnnotation is request.AnnotationAddresses, the addresses an
// admission reserved, which this package sits below.
const addressesAnnotation = "scw-lb-ipam.io/addresses"

// PublishesReserved reports whether a Service with annotations ann has
// external-dns publish its name at its reserved addresses: it asks for a
// name (a hostname annotation under either prefix) and the target under
// that prefix names the addresses scw-lb-ipam.io/addresses records, as the
// webhook writes it. The sweeper keeps one bit of it per Service, to say
// in its Event that DNS points at an address the CCM has not attached;
// the hostnames themselves are not kept.
func PublishesReserved(ann map[string]string) bool {
	addrs := ann[addressesAnnotation]
	if addressSet(addrs) == nil {
		return false
	}
	for _, p := range ExternalDNSPrefixes {
		if _, asks := ann[p+"hostname"]; asks {
			return SameAddresses(ann[p+"target"], addrs)
		}
	}
	return false
}

// ExternalDNSPrefixes are external-dns's annotation prefixes, in the order
// a Service's hostname annotation is looked for: v0.22's, then the older
// releases' that most manifests use.
var ExternalDNSPrefixes = []string{ExternalDNSPrefix, ExternalDNSPrefixLegacy}

// SameAddresses reports whether two comma-separated address lists name
// the same addresses, in any order and spacing: a target is the webhook's
// when it names the addresses it recorded.
func SameAddresses(a, b string) bool { return slices.Equal(addressSet(a), addressSet(b)) }

// addressSet is a comma-separated list of addresses, sorted; nil when it
// names none.
func addressSet(v string) []string {
	out := ccm.Items(v)
	slices.Sort(out)
	return out
}
