package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// The image has no /etc/ssl: without these roots, TLS to the Scaleway
	// API would fail there. Used only when the system has no roots of its own.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/version"
)

const usage = `scw-lb-ipam: stable private IPs for Scaleway Load Balancers

Usage:
  scw-lb-ipam serve [flags]      run the admission webhook (and the sweeper on the leader)
  scw-lb-ipam status [flags]     print each pool's capacity and who holds which address
  scw-lb-ipam preflight [flags]  check an install: credentials, pool file, networks, IPAM and the
                                 webhook; --write also books and releases a canary address per pool
  scw-lb-ipam handover --from A --to B [--namespace N] [--dry-run] [flags]
                                 move cluster A's retained reservations to cluster B, whose
                                 pool file --config is (a cluster migration)
  scw-lb-ipam version            print the version, the commit and the Go toolchain
  scw-lb-ipam help               show this text

Scaleway credentials come from the SDK environment: SCW_ACCESS_KEY,
SCW_SECRET_KEY, SCW_DEFAULT_PROJECT_ID (and SCW_API_URL to point elsewhere).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scw-lb-ipam:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("a command is required")
	}
	switch args[0] {
	case "serve":
		opts, err := app.ParseFlags(args[1:])
		if err != nil {
			return err
		}
		return app.Serve(ctx, opts)
	case "status":
		opts, err := app.ParseStatusFlags(args[1:])
		if err != nil {
			return err
		}
		return app.Status(ctx, opts, os.Stdout)
	case "preflight":
		opts, err := app.ParsePreflightFlags(args[1:])
		if err != nil {
			return err
		}
		return app.Preflight(ctx, opts, os.Stdout)
	case "handover":
		opts, err := app.ParseHandoverFlags(args[1:])
		if err != nil {
			return err
		}
		return app.Handover(ctx, opts, os.Stdout)
	case "version", "--version":
		fmt.Println("scw-lb-ipam", version.String())
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
