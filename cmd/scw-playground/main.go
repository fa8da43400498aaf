package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/playground"
)

func main() {
	root := flag.String("root", ".", "the repository (bin/, charts/, examples/)")
	pools := flag.String("pools", "", "pool file to seed and serve (default examples/pools.yaml)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zap.New(zap.UseDevMode(true), zap.Level(zapcore.InfoLevel), zap.WriteTo(os.Stdout))
	if err := playground.Run(ctx, playground.Options{Root: *root, PoolFile: *pools, Out: os.Stdout, Log: log}); err != nil {
		fmt.Fprintln(os.Stderr, "scw-playground:", err)
		os.Exit(1)
	}
}
