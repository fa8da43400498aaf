package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/allocator"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// configReloader applies pool-file changes. It polls rather than watches:
// a ConfigMap volume changes by swapping symlinks, which inotify reports
// unreliably, and a few seconds of delay do not matter for a pool file.
type configReloader struct {
	path   string
	every  time.Duration
	cloud  scaleway.Cloud
	alloc  *allocator.Allocator
	policy ipam.Retention
	gauge  *configGauge
	clock  clock.WithTicker
	log    logr.Logger

	last []byte // content of the file in use, or refused for good
	// A file whose check failed on a transient Scaleway error is tried
	// again at retryAt, with a doubling delay: a reload is never dropped
	// while replicas could diverge.
	retryAt    time.Time
	retryDelay time.Duration
}

// reloadOptions configure setupConfigReloadWithManager.
type reloadOptions struct {
	path  string
	every time.Duration
	// loaded is the file Serve started with.
	loaded []byte
	cloud  scaleway.Cloud
	alloc  *allocator.Allocator
	policy ipam.Retention
	reg    prometheus.Registerer
	log    logr.Logger
}

// setupConfigReloadWithManager polls the pool file while mgr runs and swaps
// a good new one into the allocator, which the webhook and the sweeper
// read. It exports scw_lb_ipam_config_generation, 1 for the file Serve
// started with.
func setupConfigReloadWithManager(mgr manager.Manager, o reloadOptions) error {
	gauge := newConfigGauge(o.reg)
	gauge.loaded(o.loaded)
	return mgr.Add(newConfigReloader(o, gauge, clock.RealClock{}))
}

// newConfigReloader starts from the file Serve loaded, not from a fresh
// read: a change made between Serve's read and the first poll would look
// like the file in use and never be applied.
func newConfigReloader(o reloadOptions, gauge *configGauge, clk clock.WithTicker) *configReloader {
	return &configReloader{path: o.path, every: o.every, cloud: o.cloud, alloc: o.alloc, policy: o.policy,
		gauge: gauge, clock: clk, log: o.log, last: o.loaded}
}

// maxReloadDelay caps the delay between retries of a transient failure.
const maxReloadDelay = 5 * time.Minute

// NeedLeaderElection is false: every replica admits Services.
func (r *configReloader) NeedLeaderElection() bool { return false }

// Start polls until ctx ends.
func (r *configReloader) Start(ctx context.Context) error {
	return poll(ctx, r.clock, r.every, r.check)
}

// poll runs check every interval until ctx ends: the pool file's and the
// API key's reloaders.
func poll(ctx context.Context, clk clock.WithTicker, every time.Duration, check func(context.Context)) error {
	t := clk.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			check(ctx)
		}
	}
}

// check reloads when the content changed. A file that does not parse, or
// does not match the Private Networks, is refused with its reasons, and the
// configuration in use stays; when Scaleway could not be asked, the same
// file is tried again with backoff.
func (r *configReloader) check(ctx context.Context) {
	data, err := os.ReadFile(r.path)
	if err != nil {
		r.log.Error(err, "reading the pool file; keeping the configuration in use", "path", r.path)
		return
	}
	if bytes.Equal(data, r.last) || r.clock.Now().Before(r.retryAt) {
		return
	}
	cfg, err := ipam.ParseConfig(data)
	if err == nil {
		err = r.policy.Check(cfg)
	}
	if err == nil {
		err = inventory.Resolve(ctx, r.cloud, cfg)
		if scaleway.Classify(err) == scaleway.KindUnavailable {
			r.retryDelay = min(max(2*r.retryDelay, r.every), maxReloadDelay)
			r.retryAt = r.clock.Now().Add(r.retryDelay)
			r.log.Error(err, "the new pool file could not be checked against Scaleway; keeping the configuration in use and trying again", "path", r.path, "retryIn", r.retryDelay.String())
			return
		}
	}
	r.retryAt, r.retryDelay = time.Time{}, 0
	if err != nil {
		r.log.Error(err, "the new pool file is refused; keeping the configuration in use", "path", r.path, "sha256", fileHash(data))
		r.last = data // report once, not at every tick
		return
	}
	r.alloc.Inventory().SetConfig(cfg)
	// The new pools' views and indexes now, not at the next background
	// listing: until then every pool CREATE would list by itself.
	if err := r.alloc.Inventory().Refresh(ctx); err != nil {
		r.log.Error(err, "listing the pools after the reload; the background listing tries again")
	}
	r.last = data
	gen := r.gauge.loaded(data)
	r.log.Info("pool file reloaded", "path", r.path, "pools", len(cfg.Pools), "generation", gen, "sha256", fileHash(data))
}

// fileHash identifies a pool file in logs and metrics: replicas that show
// the same hash run the same configuration.
func fileHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// configGauge is scw_lb_ipam_config_generation: 1 for the file loaded at
// start, one more for every reload, labelled with the file's hash.
type configGauge struct {
	vec *prometheus.GaugeVec
	gen int
}

func newConfigGauge(reg prometheus.Registerer) *configGauge {
	g := &configGauge{vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "scw_lb_ipam_config_generation",
		Help: "Pool files loaded by this replica (1 at start, +1 per reload), labelled with the sha256 prefix of the file in use.",
	}, []string{"sha256"})}
	reg.MustRegister(g.vec)
	return g
}

func (g *configGauge) loaded(data []byte) int {
	if g == nil {
		return 0
	}
	g.gen++
	g.vec.Reset()
	g.vec.WithLabelValues(fileHash(data)).Set(float64(g.gen))
	return g.gen
}
