package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
)

// StatusOptions are the flags of "status".
type StatusOptions struct {
	ConfigFile string
	// KeyDir is serve's --scaleway-key-dir: the key in use, which the
	// pod's environment may no longer hold.
	KeyDir string
	Output string // table or json
	// Kubeconfig, when set, is read to name the Services that use
	// bring-your-own IPs (IPAM knows nothing of them).
	Kubeconfig string
	// ScalewayOptions add to the SDK environment (tests).
	ScalewayOptions []scw.ClientOption
	// Services reads Services instead of --kubeconfig (tests).
	Services client.Reader
	// PendingGrace is the install's: "retained until" of a pending
	// reservation retained by an older version, which has no release-at
	// yet. Every other release time is the ledger's.
	PendingGrace time.Duration
	// ConvergenceGrace is the install's: how long a reservation no Service
	// uses may stay attached to a Load Balancer before it is marked
	// STRANDED, as the sweeper counts it (sweeper.Stranded).
	ConvergenceGrace time.Duration
}

// ParseStatusFlags reads the flags of "status".
func ParseStatusFlags(args []string) (StatusOptions, error) {
	var o StatusOptions
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.StringVar(&o.KeyDir, "scaleway-key-dir", DefaultKeyDir, keyDirUsage)
	fs.StringVar(&o.ConfigFile, "config", "/etc/scw-lb-ipam/pools.yaml", "pool file")
	fs.StringVar(&o.Output, "o", "table", "output: table or json")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, to name the Services using bring-your-own IPs (read-only)")
	fs.DurationVar(&o.ConvergenceGrace, "convergence-grace", sweeper.DefaultConvergenceGrace, "the install's --convergence-grace: a reservation no Service uses, attached to a Load Balancer longer than this, is marked STRANDED")
	fs.DurationVar(&o.PendingGrace, "pending-grace", sweeper.DefaultPendingGrace, "the install's --pending-grace, for reservations retained by an older version (every other release time is read from IPAM)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.Output != "table" && o.Output != "json" {
		return o, fmt.Errorf("-o %q: use table or json", o.Output)
	}
	return o, nil
}

// Status prints each pool's capacity and who holds which address, read
// from IPAM (read-only: it never books, tags or releases).
func Status(ctx context.Context, o StatusOptions, out io.Writer) error {
	cfg, _, err := loadConfig(o.ConfigFile)
	if err != nil {
		return err
	}
	cloud, err := resolvedCloud(ctx, cfg, o.KeyDir, o.ScalewayOptions)
	if err != nil {
		return err
	}
	inv := inventory.New(inventory.Options{Cloud: cloud, Config: cfg, Retention: ipam.Retention{PendingGrace: o.PendingGrace}})
	if err := inv.Refresh(ctx); err != nil {
		return fmt.Errorf("listing the pools' addresses: %w", err)
	}
	report := inv.Report()
	var unlisted []unlistedID
	byo := false
	if o.Services == nil && o.Kubeconfig != "" {
		rc, err := restConfig(o.Kubeconfig)
		if err != nil {
			return err
		}
		if o.Services, err = client.New(rc, client.Options{}); err != nil {
			return err
		}
	}
	if o.Services != nil {
		users, err := liveUsers(ctx, o.Services)
		if err != nil {
			return fmt.Errorf("reading the Services that use the IPs: %w", err)
		}
		nameBringYourOwn(users, report)
		unlisted = judgeConvergence(ctx, cloud, users, report)
		byo = true
	}
	if o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			ClusterName string                 `json:"clusterName"`
			Region      string                 `json:"region"`
			Pools       []inventory.PoolReport `json:"pools"`
			Unlisted    []unlistedID           `json:"unlistedIDs,omitempty"`
		}{cfg.ClusterName, cfg.Region, report, unlisted})
	}
	if err := printTable(out, cfg, report, byo, unlisted, time.Now(), o.grace()); err != nil {
		return err
	}
	if !byo {
		fmt.Fprintln(out, "\n(bring-your-own IPs show their IPAM holder only: pass --kubeconfig to name the Services using them)")
	}
	return nil
}

// resolvedCloud is the Scaleway client of a one-off command, with the pool
// file's pools resolved against the live Private Networks.
func resolvedCloud(ctx context.Context, cfg *ipam.Config, keyDir string, opts []scw.ClientOption) (scaleway.Cloud, error) {
	key, err := newKey(keyDir)
	if err != nil {
		return nil, err
	}
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: cfg.Region, Key: key, ClientOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("%w (check SCW_ACCESS_KEY, SCW_SECRET_KEY and SCW_DEFAULT_PROJECT_ID)", err)
	}
	if err := inventory.Resolve(ctx, cloud, cfg); err != nil {
		return nil, err
	}
	return cloud, nil
}

// liveUsers maps each IPAM ID live LoadBalancer Services reference to the
// Service.
func liveUsers(ctx context.Context, services client.Reader) (map[string]*servicecache.Record, error) {
	var list corev1.ServiceList
	if err := services.List(ctx, &list); err != nil {
		return nil, err
	}
	users := map[string]*servicecache.Record{}
	for i := range list.Items {
		rec := servicecache.NewRecord(&list.Items[i])
		for _, id := range rec.LiveIDs() {
			users[id] = rec
		}
	}
	return users, nil
}

// nameBringYourOwn names the live Service using each IP that is not one of
// this cluster's reservations: IPAM tags do not say who uses such an IP.
func nameBringYourOwn(users map[string]*servicecache.Record, report []inventory.PoolReport) {
	for i := range report {
		for j := range report[i].Addresses {
			a := &report[i].Addresses[j]
			if user, ok := users[a.IPID]; ok && !a.Mine {
				holder := "Service " + user.Namespace + "/" + user.Name + " (bring-your-own)"
				if strings.HasPrefix(a.Holder, "Service ") || strings.HasPrefix(a.Holder, "IPAM IP ") {
					a.Holder = holder
				} else {
					a.Holder = holder + ", attached to " + a.Holder
				}
			}
		}
	}
}

// unlistedID is an ID a live Service references that the pools' listing
// does not hold: gone from IPAM, outside every pool's subnet, or not
// readable with these credentials.
type unlistedID struct {
	Service     string `json:"service"`
	IPID        string `json:"ipamID"`
	Convergence string `json:"convergence"`
}

// judgeConvergence says, for each address a live Service references,
// whether its Load Balancer has it, as the sweeper's monitor judges (with no
// grace: what is seen now). The IDs the pools' listing does not hold are
// read one by one: such an ID may lie outside every pool's subnet, and only
// IPAM's not-found says it is gone. One that cannot be read (say another
// team's bring-your-own ID these credentials may not see) shows why, and
// the others are still judged.
func judgeConvergence(ctx context.Context, cloud scaleway.Cloud, users map[string]*servicecache.Record, report []inventory.PoolReport) []unlistedID {
	listed := map[string]bool{}
	for i := range report {
		for j := range report[i].Addresses {
			a := &report[i].Addresses[j]
			listed[a.IPID] = true
			if svc, ok := users[a.IPID]; ok {
				a.Convergence = sweeper.Classify(sweeper.TargetOf(svc), &scaleway.IP{ID: a.IPID, Address: a.Address, Resource: a.Resource}, false)
			}
		}
	}
	var out []unlistedID
	for _, id := range slices.Sorted(maps.Keys(users)) {
		if listed[id] {
			continue
		}
		svc := users[id]
		u := unlistedID{Service: svc.Namespace + "/" + svc.Name, IPID: id}
		ip, err := cloud.GetIP(ctx, id)
		switch {
		case scaleway.Classify(err) == scaleway.KindNotFound:
			u.Convergence = sweeper.ReasonGone
		case err != nil:
			u.Convergence = "unknown (" + err.Error() + ")"
		default:
			u.Convergence = sweeper.Classify(sweeper.TargetOf(svc), ip, true)
		}
		out = append(out, u)
	}
	return out
}

// printTable prints the pools, then their addresses; with the Services
// (withServices), whether each used address is applied, and the IDs the
// pools' listing does not hold; now and grace judge which are stranded.
func printTable(out io.Writer, cfg *ipam.Config, report []inventory.PoolReport, withServices bool, unlisted []unlistedID, now time.Time, grace time.Duration) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "cluster %s, region %s\n\n", cfg.ClusterName, cfg.Region)
	fmt.Fprintln(w, "POOL\tPRIVATE NETWORK\tSUBNET\tRANGES\tTOTAL\tUSED (CLUSTER)\tUSED (OTHERS)\tRETAINED\tFREE")
	for _, r := range report {
		ranges := strings.Join(r.Ranges, ",")
		if ranges == "" {
			ranges = "(IPAM chooses)"
		}
		total, free := fmt.Sprint(r.Total), fmt.Sprint(r.Free)
		if r.Total == 0 {
			total, free = "-", "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Pool, r.PrivateNetworkID, r.Subnet, ranges, total, r.UsedByCluster, r.UsedByOthers, r.Retained, free)
	}
	fmt.Fprintln(w)
	header := "POOL\tADDRESS\tIPAM ID\tHOLDER"
	if withServices {
		header += "\tCONVERGENCE"
	}
	fmt.Fprintln(w, header)
	for _, r := range report {
		for _, a := range r.Addresses {
			holder := a.Holder
			if !a.RetainedUntil.IsZero() {
				holder = fmt.Sprintf("retained until %s (%s)", a.RetainedUntil.UTC().Format(time.RFC3339), strings.TrimPrefix(holder, "Service "))
			}
			if sweeper.Stranded(a.Resource, a.RetainedSince, now, grace) {
				holder += "; STRANDED: no Service uses it and its Load Balancer was not deleted (docs/troubleshooting.md)"
			}
			row := fmt.Sprintf("%s\t%s\t%s\t%s", r.Pool, a.Address, a.IPID, holder)
			if withServices {
				row += "\t" + orDash(a.Convergence)
			}
			fmt.Fprintln(w, row)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "POOL\tNAMESPACE\tHELD\tRETAINED\tSHARE")
	for _, r := range report {
		for _, u := range r.Namespaces {
			share := "-"
			if u.Share > 0 {
				share = fmt.Sprint(u.Share)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", r.Pool, u.Namespace, u.Held, u.Retained, share)
		}
	}
	if len(unlisted) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "SERVICE\tIPAM ID (OUTSIDE THE POOLS)\tCONVERGENCE")
		for _, g := range unlisted {
			fmt.Fprintf(w, "%s\t%s\t%s\n", g.Service, g.IPID, g.Convergence)
		}
	}
	return w.Flush()
}

// orDash shows an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// grace is the convergence grace status judges stranded reservations by:
// the sweeper's default when the options set none.
func (o StatusOptions) grace() time.Duration {
	if o.ConvergenceGrace <= 0 {
		return sweeper.DefaultConvergenceGrace
	}
	return o.ConvergenceGrace
}
