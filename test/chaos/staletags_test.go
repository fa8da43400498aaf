package chaos

import (
	"fmt"
	"slices"
	"time"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// staleReleaseAt writes, behind the replicas' back, a release-at an hour
// before orphaned-since on up to n retained reservations of the other
// clients (the churn's early releases are counted), as an older version or
// a hand edit leaves one: no release time, which nobody acts on until the
// sweeper rewrites it, and which must not make the leader loop (the cycles'
// check). The most recently retained are chosen, whose retention has the
// longest to run. It waits up to 30 s for retained reservations, and says
// what it wrote.
func (r *run) staleReleaseAt(n int) string {
	console, err := r.env.Console()
	if err != nil {
		return "none: " + err.Error()
	}
	api := ipamapi.NewAPI(console)
	var done []string
	localrun.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		ips := r.env.Emu.IPs()
		slices.Reverse(ips) // newest first
		for _, ip := range ips {
			e, ok := ipam.ParseEntry(ip.Tags)
			if len(done) == n || !ok || !e.Owns("chaos") || e.OrphanedSince.IsZero() || e.Service.Namespace == churnNS || ip.Resource != nil {
				continue
			}
			e.ReleaseAt = e.OrphanedSince.Add(-time.Hour)
			tags := e.Tags()
			for range 5 { // through the injected faults
				if _, err := api.UpdateIP(&ipamapi.UpdateIPRequest{IPID: ip.ID, Tags: &tags}); err == nil {
					done = append(done, fmt.Sprintf("%s (%s)", ip.Address.IP, e.Service))
					break
				}
			}
		}
		return len(done) > 0
	})
	if len(done) == 0 {
		return "none: no retained reservation of the other clients within 30s"
	}
	return fmt.Sprintf("%d, on %v", len(done), done)
}
