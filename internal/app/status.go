package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// StatusOptions are the flags of "status".
type StatusOptions struct {
	ConfigFile string
	Output     string // table or json
	// Kubeconfig, when set, is read to name the Services that use
	// bring-your-own IPs (IPAM knows nothing of them).
	Kubeconfig string
	// ScalewayOptions add to the SDK environment (tests).
	ScalewayOptions []scw.ClientOption
	// Services reads Services instead of --kubeconfig (tests).
	Services client.Reader
}

// ParseStatusFlags reads the flags of "status".
func ParseStatusFlags(args []string) (StatusOptions, error) {
	var o StatusOptions
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.StringVar(&o.ConfigFile, "config", "/etc/scw-lb-ipam/pools.yaml", "pool file")
	fs.StringVar(&o.Output, "o", "table", "output: table or json")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, to name the Services using bring-your-own IPs (read-only)")
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
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: cfg.Region, ClientOptions: o.ScalewayOptions})
	if err != nil {
		return fmt.Errorf("%w (check SCW_ACCESS_KEY, SCW_SECRET_KEY and SCW_DEFAULT_PROJECT_ID)", err)
	}
	if err := cfg.Resolve(ctx, cloud); err != nil {
		return err
	}
	alloc := ipam.NewAllocator(ipam.AllocatorOptions{Cloud: cloud, Config: cfg})
	if err := alloc.Refresh(ctx); err != nil {
		return fmt.Errorf("listing the pools' addresses: %w", err)
	}
	report := alloc.Report()
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
		if err := nameBringYourOwn(ctx, o.Services, report); err != nil {
			return fmt.Errorf("reading the Services that use the IPs: %w", err)
		}
		byo = true
	}
	if o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			ClusterName string            `json:"clusterName"`
			Region      string            `json:"region"`
			Pools       []ipam.PoolReport `json:"pools"`
		}{cfg.ClusterName, cfg.Region, report})
	}
	if err := printTable(out, cfg, report); err != nil {
		return err
	}
	if !byo {
		fmt.Fprintln(out, "\n(bring-your-own IPs show their IPAM holder only: pass --kubeconfig to name the Services using them)")
	}
	return nil
}

// nameBringYourOwn names the live Service using each IP that is not one of
// this cluster's reservations: IPAM tags do not say who uses such an IP.
func nameBringYourOwn(ctx context.Context, services client.Reader, report []ipam.PoolReport) error {
	var list corev1.ServiceList
	if err := services.List(ctx, &list); err != nil {
		return err
	}
	users := map[string]string{}
	for i := range list.Items {
		if svc := &list.Items[i]; ccm.Live(svc) {
			for _, id := range ccm.ReferencedIDs(svc) {
				users[id] = svc.Namespace + "/" + svc.Name
			}
		}
	}
	for i := range report {
		for j := range report[i].Addresses {
			a := &report[i].Addresses[j]
			if user, ok := users[a.IPID]; ok && !a.Mine {
				holder := "Service " + user + " (bring-your-own)"
				if strings.HasPrefix(a.Holder, "Service ") || strings.HasPrefix(a.Holder, "IPAM IP ") {
					a.Holder = holder
				} else {
					a.Holder = holder + ", attached to " + a.Holder
				}
			}
		}
	}
	return nil
}

func printTable(out io.Writer, cfg *ipam.Config, report []ipam.PoolReport) error {
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
	fmt.Fprintln(w, "POOL\tADDRESS\tIPAM ID\tHOLDER")
	for _, r := range report {
		for _, a := range r.Addresses {
			holder := a.Holder
			if !a.RetainedUntil.IsZero() {
				holder = fmt.Sprintf("retained until %s (%s)", a.RetainedUntil.UTC().Format(time.RFC3339), strings.TrimPrefix(holder, "Service "))
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Pool, a.Address, a.IPID, holder)
		}
	}
	return w.Flush()
}
