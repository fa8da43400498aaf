package sweeper

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
)

// Defaults of the sweeper's knobs.
const (
	DefaultInterval     = time.Minute
	DefaultPendingGrace = ipam.DefaultPendingGrace
	DefaultMaxReleases  = 20
	DefaultDebounce     = 5 * time.Second
	// MaxLedgerWritesPerCycle caps the writes of a cycle that only
	// complete the ledger (a release time, the namespace tag): a GetIP and
	// an UpdateIP each, spread over cycles after an upgrade.
	MaxLedgerWritesPerCycle = 100
)

// EventReasonIPSharedByServices is recorded on Services that reference the
// same IPAM ID: a misconfiguration the sweeper reports and never resolves.
const EventReasonIPSharedByServices = "IPSharedByServices"

// EventReasonLoadBalancerNotNamedForService is recorded on a Service whose
// reservation is attached to a Load Balancer the CCM did not make for it
// (ccm.NamedFor): a restored ID, an adoption, or a copy of an earlier
// Service of its name that the CCM synced late. The CCM will not delete
// that Load Balancer with the Service, and the reservation stays attached
// to it, stranded.
const EventReasonLoadBalancerNotNamedForService = "LoadBalancerNotNamedForService"

// EventReasonIPNotReserved is recorded once on a LoadBalancer Service that
// asks for a reserved IP but carries none (let through while the webhook
// was down under failurePolicy Ignore, or created before its namespace
// opted in): its Load Balancer keeps a DHCP address.
const EventReasonIPNotReserved = "IPNotReserved"

// EventRecorder is the events API recorder.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configures a Sweeper.
type Options struct {
	Cloud scaleway.Cloud
	// Config returns the pool file in use (it may be reloaded).
	Config func() *ipam.Config
	// ServiceStore is the Service informer's store of Records
	// (servicecache.Informer), read in place by each cycle and by the uid
	// back-fill (the Records are the informer's: nothing writes to them).
	ServiceStore toolscache.Store
	// Services, when ServiceStore is nil, reads Services instead, each made
	// a Record when read.
	Services client.Reader
	// Synced reports whether that cache has synced; the sweeper does
	// nothing while it has not, since every reservation would look unused.
	Synced func() bool
	Clock  clock.WithTicker
	// Interval between cycles; Trigger asks for one sooner.
	Interval time.Duration
	// Debounce gathers bursts of Service changes into one cycle.
	Debounce time.Duration
	// PendingGrace is the retention of a reservation whose Service never
	// existed (the admission was booked, then the create failed).
	PendingGrace time.Duration
	// Margin is the release protocol's dead zone (twice the webhook
	// timeout, see ipam.Retention): a stale release time is rewritten no
	// sooner than that from now.
	Margin time.Duration
	// MaxReleasesPerCycle caps releases in one cycle: a sudden mass of
	// orphans is more likely a bug or an outage than real deletions.
	MaxReleasesPerCycle int
	// ReportOnly logs and counts what would be released, releasing nothing.
	ReportOnly bool
	// ReleaseRemovedPools allows releasing reservations of pools no longer in
	// the pool file; without it they are kept for an operator to decide.
	ReleaseRemovedPools bool
	// Namespaces reads the namespaces' opt-in label for the report of live
	// LoadBalancer Services without private-ip-ids that should have had a
	// reservation, by the webhook's rules (request.Unreserved); nil reports
	// nothing. SetupWithManager fills it from the manager's cache.
	Namespaces client.Reader
	// Excluded namespaces are never reported: the webhook never touches
	// them (kube-system, the release's own).
	Excluded []string
	// ConvergenceGrace is how long a live Service's reserved IPs may take to
	// be applied on its Load Balancer before it is reported (Event and
	// gauge).
	ConvergenceGrace time.Duration
	// Claims are the bring-your-own claims to collect once their Service no
	// longer uses the ID; nil when there are none.
	Claims ClaimCollector
	// Events reads the IPNotApplied Events at the start of each leader
	// term (the API reader: the manager's cache does not watch Events);
	// nil starts each term with a fresh grace for every Service.
	Events client.Reader
	// View shows each cycle's reservations and the Services' conditions
	// in the apiserver (view.Mirror); nil shows nothing.
	View     Publisher
	Recorder EventRecorder
	Metrics  *Metrics
	Log      logr.Logger
}

// ClaimCollector deletes bring-your-own claims whose Service no longer uses
// their ID; inUse answers from the same live view the cycle uses. It
// returns how many it deleted and the IDs every claim it read names (the
// convergence monitor tells a bring-your-own ID, which our listing never
// holds, from one of ours gone from IPAM).
type ClaimCollector interface {
	Collect(ctx context.Context, inUse func(id string, svc types.NamespacedName) bool) (collected int, claimed []string, err error)
}

// Sweeper is the leader-only background cleaner.
type Sweeper struct {
	o       Options
	policy  ipam.Retention
	trigger chan struct{}
	mu      sync.Mutex // one cycle at a time
	// reported are the unreserved Services already given their Event.
	reported map[types.UID]bool
	// notConverged are the live Services whose reserved IPs are not applied.
	notConverged map[types.UID]*notConverged
	// backfills are the new Services whose uid tag is yet to be written.
	backfills *backfillQueue
	// stranded are the IDs the last cycle found stranded: each is logged
	// when it becomes so, not every cycle.
	stranded map[string]bool
}

// New returns a Sweeper with defaults filled in.
func New(o Options) *Sweeper {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	if o.PendingGrace <= 0 {
		o.PendingGrace = DefaultPendingGrace
	}
	if o.MaxReleasesPerCycle <= 0 {
		o.MaxReleasesPerCycle = DefaultMaxReleases
	}
	if o.Synced == nil {
		o.Synced = func() bool { return true }
	}
	if o.ConvergenceGrace <= 0 {
		o.ConvergenceGrace = DefaultConvergenceGrace
	}
	return &Sweeper{o: o, policy: ipam.Retention{PendingGrace: o.PendingGrace, Margin: o.Margin}, trigger: make(chan struct{}, 1), reported: map[types.UID]bool{},
		notConverged: map[types.UID]*notConverged{}, backfills: newBackfillQueue()}
}

// NeedLeaderElection is true: two sweepers would race to release.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Trigger asks for a cycle soon (after the debounce), e.g. after a Service
// was deleted. It never blocks.
func (s *Sweeper) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// waitSynced waits for the Service informer's first listing, false when
// ctx ends first. The informer is a runnable of its own, started beside the
// sweeper: a first cycle before its listing would fail (ErrNotSynced), and
// the next one would come an Interval later. It polls in real time, not on
// the injected clock: the listing arrives in real time.
func (s *Sweeper) waitSynced(ctx context.Context) bool {
	if s.o.Synced == nil {
		return true
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return s.o.Synced(), nil })
	return err == nil
}

// Start runs cycles every Interval and after triggers, and the uid
// back-fill of new Services, until ctx ends. It first rebuilds the
// convergence monitor's memory from the Events (see restore).
//
// A loop rather than a controller-runtime controller with a single-key
// workqueue and RequeueAfter: the sweeper runs in leader terms of its own
// (leaderRunner starts it again on every term it wins, while a controller
// starts once per manager), and one ticker and one debounced trigger are
// all such a queue would give. The loop keeps both on the injected clock,
// which the tests step.
func (s *Sweeper) Start(ctx context.Context) error {
	// Before the first cycle: a Service created after its live view is
	// queued, not missed.
	stopBackfills := s.startBackfills(ctx)
	defer stopBackfills()
	s.restore(ctx)
	if s.o.View != nil {
		s.o.View.Reset()
	}
	if !s.waitSynced(ctx) {
		return nil
	}
	tick := s.o.Clock.NewTicker(s.o.Interval)
	defer tick.Stop()
	for {
		rep, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.o.Log.Error(err, "sweep cycle failed; retrying at the next one")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		case <-dueAt(s.o.Clock, s.o.Interval, rep.NextRelease):
		case <-s.trigger:
			select {
			case <-ctx.Done():
				return nil
			case <-s.o.Clock.After(s.o.Debounce):
			}
		}
	}
}

// dueAt fires at a release brought forward (a second after it, as the tag
// holds whole seconds), never when there is none or it is an Interval or
// more away (the ticker comes first).
func dueAt(clk clock.Clock, interval time.Duration, at time.Time) <-chan time.Time {
	d := at.Sub(clk.Now()) + time.Second
	if at.IsZero() || d >= interval {
		return nil
	}
	return clk.After(max(d, 0))
}

// Handler triggers a cycle on Service changes that may free or claim an IP:
// deletions, and updates that change the type or the referenced IDs. A
// creation only queues the Service's uid back-fill (see Backfill), which
// reads its own IDs rather than every reservation of the cluster. Register
// it on the Service informer: it reads *servicecache.Record.
func (s *Sweeper) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			// The informer's first listing replays every Service: the
			// leader's first cycle covers those in one listing, where a
			// GetIP per ID of each would cost more.
			if svc, ok := obj.(*servicecache.Record); ok && !isInInitialList && len(svc.LiveIDs()) > 0 {
				s.backfills.add(svc.Key())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*servicecache.Record)
			n, ok2 := newObj.(*servicecache.Record)
			if ok1 && ok2 && (o.Live() != n.Live() || o.Annotation(ccm.AnnotationPrivateIPIDs) != n.Annotation(ccm.AnnotationPrivateIPIDs)) {
				s.Trigger()
			}
		},
		DeleteFunc: func(any) { s.Trigger() },
	}
}

func (s *Sweeper) event(svc *corev1.Service, eventtype, reason, note string, args ...any) {
	if s.o.Recorder != nil {
		s.o.Recorder.Eventf(svc, nil, eventtype, reason, "Sweep", note, args...)
	}
}
