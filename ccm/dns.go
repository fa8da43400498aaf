package ccm

import (
	"slices"
	"strings"
)

// PublishesReserved reports whether a Service with annotations ann has
// external-dns publish its name at its reserved addresses: it asks for a
// name (a hostname annotation under either prefix) and the target under
// that prefix names the addresses scw-lb-ipam.io/addresses records, as the
// webhook writes it. The sweeper keeps one bit of it per Service, to say
// in its Event that DNS points at an address the CCM has not attached;
// the hostnames themselves are not kept.
func PublishesReserved(ann map[string]string) bool {
	addrs := addressSet(ann[annotationPrefix+"addresses"])
	if addrs == nil {
		return false
	}
	for _, p := range []string{ExternalDNSPrefix, ExternalDNSPrefixLegacy} {
		if _, asks := ann[p+"hostname"]; asks {
			return slices.Equal(addressSet(ann[p+"target"]), addrs)
		}
	}
	return false
}

// addressSet is a comma-separated list of addresses, trimmed and sorted;
// nil when it names none.
func addressSet(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}
