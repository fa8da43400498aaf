package webhook

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// TestAdoptedReservationIsWorded: a reservation taken over from another
// cluster (adoptFrom) says so, and from which.
func TestAdoptedReservationIsWorded(t *testing.T) {
	r := &ipam.Grant{ID: "ip-1", Address: netip.MustParseAddr("172.16.35.200"), Pool: "dc-link", Reused: true, AdoptedFrom: "blue"}
	for what, got := range map[string]string{
		"warning": reservedWarning(r),
		"dry run": dryRunWarnings([]*ipam.Grant{r})[0],
	} {
		for _, want := range []string{"adopt", "172.16.35.200", "ip-1", "dc-link", "from cluster blue"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s %q does not say %q", what, got, want)
			}
		}
	}
}
