package app

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

func TestParseHandoverFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "prod"}, "--from and --to are required"},
		{[]string{"--from", "Old_One", "--to", "prod"}, "not a cluster name"},
		{[]string{"--from", "prod", "--to", "prod"}, "both \"prod\""},
	} {
		if _, err := ParseHandoverFlags(tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
	o, err := ParseHandoverFlags([]string{"--from", "staging", "--to", "prod", "--namespace", "web", "--dry-run"})
	if err != nil || o.From != "staging" || o.To != "prod" || o.Namespace != "web" || !o.DryRun || o.WebhookTimeout <= 0 {
		t.Fatalf("%+v %v", o, err)
	}
}

// TestHandoverCommand: the pool file's cluster receives the retained
// reservations of --from; --dry-run prints the same and writes nothing.
func TestHandoverCommand(t *testing.T) {
	srv, so, ids := statusWorld(t)
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	cfg, _, err := loadConfig(so.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	// The other cluster's live reservation (ids["staging"]) stays.
	staging, _ := srv.IP(ids["staging"])
	tags := ipam.Entry{Cluster: "staging", Pool: "dc-link", Service: types.NamespacedName{Namespace: "web", Name: "gone"}, UID: "u9", OrphanedSince: now.Add(-time.Hour), ReleaseAt: now.Add(time.Hour)}.Tags()
	gone, err := srv.AddIP(cfg.Pools[0].PrivateNetworkID, netip.MustParseAddr("172.16.35.14"), tags, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := HandoverOptions{ConfigFile: so.ConfigFile, From: "staging", To: "prod", DryRun: true, WebhookTimeout: 10 * time.Second,
		PendingGrace: 10 * time.Minute, ScalewayOptions: so.ScalewayOptions, Now: func() time.Time { return now }}
	var out bytes.Buffer
	if err := Handover(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("would move 172.16.35.14 (IPAM ID %s) web/gone pool dc-link\nwould move 1 retained reservation(s) of cluster staging to cluster prod\n", gone)
	if out.String() != want {
		t.Fatalf("dry run printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if ip, _ := srv.IP(gone); !ipam.SameTags(ip.Tags, tags) {
		t.Fatalf("the dry run wrote %v", ip.Tags)
	}

	o.DryRun = false
	out.Reset()
	if err := Handover(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "moved 172.16.35.14") || !strings.Contains(out.String(), "moved 1 retained reservation(s) of cluster staging to cluster prod") {
		t.Fatalf("printed:\n%s", out.String())
	}
	ip, _ := srv.IP(gone)
	if e, _ := ipam.ParseEntry(ip.Tags); e.Cluster != "prod" || e.UID != "u9" || !e.OrphanedSince.Equal(now) || !e.ReleaseAt.Equal(now.Add(cfg.Pools[0].Retention.Duration)) {
		t.Fatalf("ledger after the handover: %+v", e)
	}
	if ip, _ := srv.IP(ids["staging"]); !ipam.SameTags(ip.Tags, staging.Tags) {
		t.Fatalf("the live reservation of staging was re-tagged: %v", ip.Tags)
	}

	o.To = "blue"
	if err := Handover(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), `not the clusterName`) {
		t.Fatalf("--to other than the pool file's cluster: %v", err)
	}
}
