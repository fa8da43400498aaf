package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "scw-emulator:", err)
		}
		os.Exit(2)
	}
}

// seedConfig is the --seed-config file.
type seedConfig struct {
	PrivateNetworks []struct {
		Name    string   `json:"name"`
		Subnets []string `json:"subnets"`
	} `json:"privateNetworks"`
	IPs []struct {
		PrivateNetwork string   `json:"privateNetwork"` // a name above
		Address        string   `json:"address"`        // "": the lowest free IPv4 address
		Tags           []string `json:"tags"`
		Resource       *struct {
			Type       string `json:"type"` // e.g. instance_server; default custom
			ID         string `json:"id"`
			Name       string `json:"name"`
			MACAddress string `json:"macAddress"`
		} `json:"resource"`
	} `json:"ips"`
}

// pnFlags collects the repeated --private-network NAME=CIDR[,CIDR].
type pnFlags []string

func (p *pnFlags) String() string { return strings.Join(*p, " ") }

func (p *pnFlags) Set(v string) error {
	name, cidrs, ok := strings.Cut(v, "=")
	if !ok || name == "" || cidrs == "" {
		return fmt.Errorf("%q: want NAME=CIDR[,CIDR]", v)
	}
	*p = append(*p, v)
	return nil
}

// lbTimingFlags registers how long Load Balancers take, Scaleway's by
// default, so that a client meets them as slow as the real API; the
// function it returns sets them on options.
func lbTimingFlags(fs *flag.FlagSet) func(emulator.Options) emulator.Options {
	del := fs.Duration("lb-delete-delay", emulator.ScalewayLBDeleteDelay, "how long a deleted Load Balancer stays to_delete, holding its IPs, as Scaleway's do (0: gone at once)")
	create := fs.Duration("lb-create-delay", emulator.ScalewayLBCreateDelay, "how long a new Load Balancer is to_create, then creating, before it is ready and takes changes, as Scaleway's (0: ready at once)")
	settle := fs.Duration("lb-settle-delay", emulator.ScalewayLBSettleDelay, "how long a Load Balancer change (attachment, detachment, frontend, backend) shows pending, as Scaleway's (0: at once)")
	return func(o emulator.Options) emulator.Options {
		o.LBDeleteDelay, o.LBCreateDelay, o.LBSettleDelay = *del, *create, *settle
		return o
	}
}

// run serves until ctx is done. Seeded objects are printed before the
// "listening" line, so that a script waiting for that line finds them all.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scw-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	region := fs.String("region", emulator.DefaultRegion, "region served")
	projectID := fs.String("project-id", "", "project of seeded objects (default "+emulator.DefaultProjectID+")")
	secretKey := fs.String("secret-key", "", "the only X-Auth-Token accepted (default: any)")
	seedFile := fs.String("seed-config", "", "YAML file of privateNetworks (name, subnets) and ips (privateNetwork, address, tags, resource) to create at start")
	verbose := fs.Bool("v", false, "log every request to stderr")
	lbTimings := lbTimingFlags(fs)
	var pns pnFlags
	fs.Var(&pns, "private-network", "create a Private Network NAME=CIDR[,CIDR] at start (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	opts := lbTimings(emulator.Options{Region: *region, ProjectID: *projectID, SecretKey: *secretKey})
	if *verbose {
		opts.Logf = log.New(stderr, "", log.LstdFlags|log.Lmicroseconds).Printf
	}
	srv := emulator.New(opts)
	defer srv.Close()

	byName := map[string]emulator.PrivateNetwork{}
	addPN := func(name string, subnets []string) error {
		pn, err := srv.AddPrivateNetwork(name, subnets...)
		if err != nil {
			return err
		}
		byName[name] = pn
		var cidrs []string
		for _, s := range pn.Subnets {
			cidrs = append(cidrs, s.Prefix.String())
		}
		fmt.Fprintf(stdout, "private network %s id=%s subnets=%s\n", name, pn.ID, strings.Join(cidrs, ","))
		return nil
	}
	if *seedFile != "" {
		if err := seedFromFile(*seedFile, srv, addPN, byName, stdout); err != nil {
			return err
		}
	}
	for _, spec := range pns {
		name, cidrs, _ := strings.Cut(spec, "=")
		if err := addPN(name, strings.Split(cidrs, ",")); err != nil {
			return err
		}
	}

	url, err := srv.Start(*listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "scw-emulator listening on %s\n", url)
	<-ctx.Done()
	return srv.Close()
}

func seedFromFile(path string, srv *emulator.Server, addPN func(string, []string) error, byName map[string]emulator.PrivateNetwork, stdout io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("seed config: %w", err)
	}
	var cfg seedConfig
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return fmt.Errorf("seed config %s: %w", path, err)
	}
	for _, pn := range cfg.PrivateNetworks {
		if err := addPN(pn.Name, pn.Subnets); err != nil {
			return fmt.Errorf("seed config %s: %w", path, err)
		}
	}
	for i, ip := range cfg.IPs {
		pn, ok := byName[ip.PrivateNetwork]
		if !ok {
			return fmt.Errorf("seed config %s: ips[%d]: no Private Network named %q", path, i, ip.PrivateNetwork)
		}
		var addr netip.Addr
		if ip.Address != "" {
			if addr, err = netip.ParseAddr(ip.Address); err != nil {
				return fmt.Errorf("seed config %s: ips[%d]: %w", path, i, err)
			}
		}
		var res *emulator.Resource
		if r := ip.Resource; r != nil {
			res = &emulator.Resource{Type: r.Type, ID: r.ID, Name: r.Name, MACAddress: r.MACAddress}
		}
		id, err := srv.AddIP(pn.ID, addr, ip.Tags, res)
		if err != nil {
			return fmt.Errorf("seed config %s: ips[%d]: %w", path, i, err)
		}
		got, _ := srv.IP(id)
		fmt.Fprintf(stdout, "ip %s id=%s private_network=%s\n", got.Address.IP, id, ip.PrivateNetwork)
	}
	return nil
}
