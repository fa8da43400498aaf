package scaleway

import (
	"slices"
	"testing"
)

// TestRegions: every region the pool file accepted before the SDK's list
// was used is still accepted, in the order the error message lists them.
func TestRegions(t *testing.T) {
	got := Regions()
	for i, r := range []string{"fr-par", "nl-ams", "pl-waw", "it-mil"} {
		if j := slices.Index(got, r); j != i {
			t.Errorf("region %s at %d in %v, want %d", r, j, got, i)
		}
	}
}
