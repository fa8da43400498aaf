package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/playground"
)

func main() {
	root := flag.String("root", ".", "the repository (bin/, charts/, examples/)")
	pools := flag.String("pools", "", "pool file to seed and serve (default examples/pools.yaml)")
	verbose := flag.Bool("v", false, "log at debug level (the logs go to a file the banner names)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := playground.Run(ctx, playground.Options{Root: *root, PoolFile: *pools, Out: os.Stdout, Verbose: *verbose}); err != nil {
		fmt.Fprintln(os.Stderr, "scw-playground:", err)
		os.Exit(1)
	}
}
