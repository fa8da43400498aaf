package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// HandoverOptions are the flags of "handover".
type HandoverOptions struct {
	ConfigFile string
	// KeyDir is serve's --scaleway-key-dir: the key in use, which the
	// pod's environment may no longer hold.
	KeyDir    string
	From, To  string
	Namespace string
	DryRun    bool
	// WebhookTimeout and PendingGrace are the install's (serve's flags of
	// the same names): the release protocol's margin is twice the timeout.
	WebhookTimeout time.Duration
	PendingGrace   time.Duration
	// ScalewayOptions add to the SDK environment (tests).
	ScalewayOptions []scw.ClientOption
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

// ParseHandoverFlags reads the flags of "handover".
func ParseHandoverFlags(args []string) (HandoverOptions, error) {
	var o HandoverOptions
	fs := flag.NewFlagSet("handover", flag.ContinueOnError)
	fs.StringVar(&o.KeyDir, "scaleway-key-dir", DefaultKeyDir, keyDirUsage)
	fs.StringVar(&o.ConfigFile, "config", "/etc/scw-lb-ipam/pools.yaml", "pool file of the receiving cluster (its clusterName is --to)")
	fs.StringVar(&o.From, "from", "", "clusterName of the cluster whose retained reservations move")
	fs.StringVar(&o.To, "to", "", "clusterName receiving them: the pool file's")
	fs.StringVar(&o.Namespace, "namespace", "", "move this namespace's reservations only")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would move, write nothing")
	fs.DurationVar(&o.WebhookTimeout, "webhook-timeout", webhook.DefaultAdmissionTimeout, "the install's --webhook-timeout: reservations whose release is less than twice this away are left")
	fs.DurationVar(&o.PendingGrace, "pending-grace", sweeper.DefaultPendingGrace, "the install's --pending-grace")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.From == "" || o.To == "":
		return o, fmt.Errorf("--from and --to are required: the clusterNames of the cluster giving its retained reservations and of the one receiving them")
	case !ipam.IsName(o.From):
		return o, fmt.Errorf("--from %q is not a cluster name (a lower-case DNS label, as clusterName is)", o.From)
	case o.From == o.To:
		return o, fmt.Errorf("--from and --to are both %q: name the cluster the reservations move from and the one they move to", o.From)
	}
	return o, nil
}

// Handover moves cluster --from's retained reservations to --to, the pool
// file's cluster (see allocator.Handover), and prints one line per reservation
// and a total.
func Handover(ctx context.Context, o HandoverOptions, out io.Writer) error {
	cfg, _, err := loadConfig(o.ConfigFile)
	if err != nil {
		return err
	}
	if o.To != cfg.ClusterName {
		return fmt.Errorf("--to %q is not the clusterName of %s (%q): run handover with the receiving cluster's pool file, whose pools say where the reservations go", o.To, o.ConfigFile, cfg.ClusterName)
	}
	cloud, err := resolvedCloud(ctx, cfg, o.KeyDir, o.ScalewayOptions)
	if err != nil {
		return err
	}
	policy := ipam.Retention{PendingGrace: o.PendingGrace, Margin: 2 * o.WebhookTimeout}
	handed, err := allocator.Handover(ctx, cloud, cfg, policy, ipam.HandoverRequest{From: o.From, Namespace: o.Namespace, DryRun: o.DryRun, Now: o.Now})
	verb := "moved"
	if o.DryRun {
		verb = "would move"
	}
	n := 0
	for _, h := range handed {
		line := fmt.Sprintf("%s %s (IPAM ID %s) %s pool %s", verb, h.Address, h.ID, h.Service, h.Pool)
		if h.Skipped != "" {
			line = fmt.Sprintf("left %s (IPAM ID %s) %s pool %s: %s", h.Address, h.ID, h.Service, h.Pool, h.Skipped)
		} else {
			n++
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "%s %d retained reservation(s) of cluster %s to cluster %s\n", verb, n, o.From, o.To)
	return err
}
