package sweeper

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the Lease the sweeper's replicas campaign for.
const LeaseName = "scw-lb-ipam-sweeper"

// Election configures the sweeper's own leader election.
type Election struct {
	// Enabled campaigns for LeaseName in Namespace; off, the sweeper runs on
	// this replica alone (a single replica, or tests).
	Enabled   bool
	Namespace string
	// The lease timings (controller-runtime's defaults).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Registerer receives scw_lb_ipam_sweeper_leader.
	Registerer prometheus.Registerer
	Log        logr.Logger
}

// leaderRunner runs the leader-only work (the sweeper) while this replica
// holds the Lease, and campaigns again when it loses it. controller-runtime's
// own leader election ends the whole process on a lost lease; here an
// apiserver outage longer than the renew deadline costs the sweeper a few
// cycles, never the webhook, which every replica serves.
type leaderRunner struct {
	lock    resourcelock.Interface
	timing  Election
	work    func(ctx context.Context) error
	leading prometheus.Gauge
	log     logr.Logger
}

func newLeaderRunner(cfg *rest.Config, e Election, work func(context.Context) error) (*leaderRunner, error) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.Namespace, LeaseName, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()})
	if err != nil {
		return nil, fmt.Errorf("the sweeper's leader lock: %w", err)
	}
	leading := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "scw_lb_ipam_sweeper_leader", Help: "1 while this replica holds the sweeper's Lease.",
	})
	if err := e.Registerer.Register(leading); err != nil {
		return nil, err
	}
	return &leaderRunner{lock: lock, timing: e, work: work, leading: leading, log: e.Log}, nil
}

// NeedLeaderElection is false: the runner campaigns itself.
func (l *leaderRunner) NeedLeaderElection() bool { return false }

// Start campaigns until ctx ends; each term runs the work until the lease
// is lost, and the next campaign waits for that work to have returned, so
// two terms never overlap.
func (l *leaderRunner) Start(ctx context.Context) error {
	for ctx.Err() == nil {
		var wg sync.WaitGroup
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            l.lock,
			LeaseDuration:   l.timing.LeaseDuration,
			RenewDeadline:   l.timing.RenewDeadline,
			RetryPeriod:     l.timing.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(term context.Context) {
					wg.Add(1)
					defer wg.Done()
					l.leading.Set(1)
					l.log.Info("leading: the sweeper runs here", "identity", l.lock.Identity())
					if err := l.work(term); err != nil && term.Err() == nil {
						l.log.Error(err, "the sweeper stopped")
					}
				},
				OnStoppedLeading: func() {
					l.leading.Set(0)
					if ctx.Err() == nil {
						l.log.Info("lost the sweeper's lease; the webhook keeps serving, campaigning again")
					}
				},
			},
		})
		if err != nil {
			return err
		}
		le.Run(ctx)
		wg.Wait()
		select {
		case <-ctx.Done():
		case <-time.After(l.timing.RetryPeriod):
		}
	}
	return nil
}
