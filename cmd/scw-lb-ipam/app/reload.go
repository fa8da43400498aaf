package app

import (
	"bytes"
	"context"
	"os"
	"time"

	"github.com/go-logr/logr"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
)

// configReloader applies pool-file changes. It polls rather than watches:
// a ConfigMap volume changes by swapping symlinks, which inotify reports
// unreliably, and a few seconds of delay do not matter for a pool file.
type configReloader struct {
	path  string
	every time.Duration
	cloud ipam.Cloud
	alloc *ipam.Allocator
	log   logr.Logger

	last []byte // content of the file in use
}

// NeedLeaderElection is false: every replica admits Services.
func (r *configReloader) NeedLeaderElection() bool { return false }

// Start polls until ctx ends.
func (r *configReloader) Start(ctx context.Context) error {
	r.last, _ = os.ReadFile(r.path)
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.check(ctx)
		}
	}
}

// check reloads when the content changed. A file that does not parse, or
// does not match the Private Networks, is refused with its reasons, and
// the configuration in use stays.
func (r *configReloader) check(ctx context.Context) {
	data, err := os.ReadFile(r.path)
	if err != nil {
		r.log.Error(err, "reading the pool file; keeping the configuration in use", "path", r.path)
		return
	}
	if bytes.Equal(data, r.last) {
		return
	}
	cfg, err := ipam.ParseConfig(data)
	if err == nil {
		err = cfg.Resolve(ctx, r.cloud)
	}
	if err != nil {
		r.log.Error(err, "the new pool file is refused; keeping the configuration in use", "path", r.path)
		r.last = data // report once, not at every tick
		return
	}
	r.alloc.SetConfig(cfg)
	r.last = data
	r.log.Info("pool file reloaded", "path", r.path, "pools", len(cfg.Pools))
}
