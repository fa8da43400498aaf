package sweeper

import (
	"context"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// backfillQueue holds the new Services whose uid tag the leader is to
// write. A set keyed by namespace/name: a burst of creates holds each
// Service once however often the informer replays it, so it is bounded by
// the cluster's Services, and it accepts keys only while this replica
// leads (a replica that never leads would hold them for nothing).
type backfillQueue struct {
	mu      sync.Mutex
	leading bool
	keys    map[types.NamespacedName]struct{}
	ready   chan struct{}
}

func newBackfillQueue() *backfillQueue {
	return &backfillQueue{keys: map[types.NamespacedName]struct{}{}, ready: make(chan struct{}, 1)}
}

// add queues key while leading, and never blocks (the informer calls it).
func (q *backfillQueue) add(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.leading {
		return
	}
	q.keys[key] = struct{}{}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// lead starts or ends accepting keys. Ending drops what is queued: the
// next leader's first cycle back-fills every Service, these included.
func (q *backfillQueue) lead(on bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.leading = on
	if !on {
		clear(q.keys)
	}
}

// take empties the queue, in a stable order.
func (q *backfillQueue) take() []types.NamespacedName {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(q.keys))
	for k := range q.keys {
		out = append(out, k)
	}
	clear(q.keys)
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// startBackfills accepts new Services and back-fills them a debounce after
// they came, until ctx ends; the returned func stops accepting and waits
// for the last round to end, so that a lost term leaves nothing running.
func (s *Sweeper) startBackfills(ctx context.Context) (stop func()) {
	s.backfills.lead(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.backfills.ready:
			}
			// The debounce gathers a burst of creates into one round.
			select {
			case <-ctx.Done():
				return
			case <-s.o.Clock.After(s.o.Debounce):
			}
			if _, err := s.Backfill(ctx); err != nil && ctx.Err() == nil {
				s.o.Log.Error(err, "uid back-fill failed; the next cycle writes it")
			}
		}
	}()
	return func() {
		s.backfills.lead(false)
		<-done
	}
}

// Backfill writes the uid tag of the Services created since the last
// round, reading only their own IDs: one GetIP per ID and one SetTags per
// IP whose ledger lacks the Service's uid or still has orphaned-since,
// whatever the number of the cluster's reservations, where a cycle lists
// them all.
//
// It holds the cycle's mutex: a cycle whose live view predates the
// Service has found its IP unreferenced, and the orphaned-since it writes
// must not land after, and erase, the uid written here. An IP whose ledger
// is not this cluster's, names another Service or lies outside every
// pool's subnet is left to the cycles, as is any error (counted).
func (s *Sweeper) Backfill(ctx context.Context) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rep Report
	keys := s.backfills.take()
	if len(keys) == 0 {
		return rep, nil
	}
	defer func() {
		if s.o.Metrics != nil {
			s.o.Metrics.errors.Add(float64(rep.Errors))
		}
	}()
	if !s.o.Synced() {
		rep.Errors++
		return rep, ErrNotSynced
	}
	cfg := s.o.Config()
	scope := poolSubnets(cfg)
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		s.backfill(ctx, cfg, scope, key, &rep)
	}
	return rep, nil
}

// backfill handles one Service as the cycle would its IPs, reading the
// Service when the round runs: gone or no longer live, nothing is written
// (the cycle that its deletion triggers tags its IPs); re-created, the
// current uid is written.
func (s *Sweeper) backfill(ctx context.Context, cfg *ipam.Config, scope map[string]bool, key types.NamespacedName, rep *Report) {
	svc, ok, err := s.record(ctx, key)
	if err != nil {
		rep.Errors++
		s.o.Log.Error(err, "reading a new Service from the cache for its uid back-fill", "service", key)
	}
	if !ok {
		return
	}
	ids := svc.LiveIDs()
	ref := []liveRef{judgedRef(cfg, svc)}
	for _, id := range ids {
		at := s.o.Clock.Now()
		got, err := s.o.Cloud.GetIP(ctx, id)
		if err != nil {
			if scaleway.Classify(err) != scaleway.KindNotFound {
				rep.Errors++
				s.o.Log.Error(err, "reading an IP for its uid back-fill", "ipamID", id, "service", key)
			}
			continue
		}
		ip := ipam.Read(got, at)
		if !ip.Owns(cfg.ClusterName) || ip.Service != key || !s.inScope(scope, ip) {
			continue
		}
		rep.Scanned++
		rep.Referenced++
		s.referenced(ctx, ip, ref, rep, nil)
	}
}

// poolSubnets are the subnets of the pool file's pools.
func poolSubnets(cfg *ipam.Config) map[string]bool {
	scope := map[string]bool{}
	for _, p := range cfg.Pools {
		scope[p.SubnetID()] = true
	}
	return scope
}

// inScope reports whether an IP of this cluster's ledger is the sweeper's
// to tag and release: in a pool's subnet, or in a removed pool's when the
// operator allows releasing those.
func (s *Sweeper) inScope(scope map[string]bool, ip *ipam.Reservation) bool {
	return scope[ip.SubnetID] || s.o.ReleaseRemovedPools
}
