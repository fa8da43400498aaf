package scaleway

import "github.com/scaleway/scaleway-sdk-go/scw"

// Regions are the Scaleway regions, as the SDK knows them; IPAM and VPC are
// offered in each.
func Regions() []string {
	out := make([]string, len(scw.AllRegions))
	for i, r := range scw.AllRegions {
		out[i] = r.String()
	}
	return out
}
