package app

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// The pool occupancy is one gauge with a state label, next to the age of
// the listing behind it; a pool not listed yet exports nothing.
func TestPoolCollector(t *testing.T) {
	listed := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	c := newPoolCollector(func() []ipam.PoolStats {
		return []ipam.PoolStats{
			{Pool: "dc-link", Total: 51, UsedByCluster: 3, UsedByOthers: 1, Retained: 2, Free: 47, Known: true, Listed: listed},
			{Pool: "general", Total: 252},
		}
	}, func() time.Time { return listed.Add(42 * time.Second) })
	want := `
# HELP scw_lb_ipam_index_age_seconds Seconds since this replica last listed the pool's subnet: the age of its occupancy view and of its reservation index of this cluster's IPs.
# TYPE scw_lb_ipam_index_age_seconds gauge
scw_lb_ipam_index_age_seconds{pool="dc-link"} 42
# HELP scw_lb_ipam_pool_addresses ` + poolAddressesHelp + `
# TYPE scw_lb_ipam_pool_addresses gauge
scw_lb_ipam_pool_addresses{pool="dc-link",state="free"} 47
scw_lb_ipam_pool_addresses{pool="dc-link",state="retained"} 2
scw_lb_ipam_pool_addresses{pool="dc-link",state="total"} 51
scw_lb_ipam_pool_addresses{pool="dc-link",state="used_by_cluster"} 3
scw_lb_ipam_pool_addresses{pool="dc-link",state="used_by_others"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != len(poolStates)+1 {
		t.Fatalf("%d series, want %d (the unlisted pool exports none)", n, len(poolStates))
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}
