package chaos

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/ccmprocess"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// ccmReplicas is how many Scaleway CCM processes run, with leader election
// as shipped: two, as the webhook's, so that a killed leader's Load
// Balancers are someone else's work once its lease expires.
const ccmReplicas = 2

// ccmChaos kills the CCM replica that leads, once, at half the operations,
// without cleanup (its lease is not released), and starts a new process in
// its place after podRestart, as its Deployment would.
type ccmChaos struct {
	env   *testenv.Env
	done  *atomic.Int64
	total int

	mu   sync.Mutex
	kill string // what was killed, when; "" before
}

func (c *ccmChaos) run(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if c.done.Load() < int64(c.total/2) {
				continue
			}
			i := slices.IndexFunc(c.env.CCM.Processes(), (*ccmprocess.Process).Leads)
			if i < 0 {
				continue // none leads yet: a lease is still expiring
			}
			at := c.done.Load()
			err := c.env.CCM.Kill(i, podRestart)
			c.mu.Lock()
			c.kill = fmt.Sprintf("the leader (replica %d) at operation %d", i, at)
			if err != nil {
				c.kill += ", restart failed: " + err.Error()
			}
			c.mu.Unlock()
			return
		}
	}
}

// check fails the run unless the leading CCM was killed and a replica leads
// again: a run whose CCM never failed over proves nothing of it.
func (c *ccmChaos) check(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kill == "" {
		t.Error("the leading CCM replica was never killed")
	}
	if !slices.ContainsFunc(c.env.CCM.Processes(), (*ccmprocess.Process).Leads) {
		t.Errorf("no CCM replica leads at the end; their logs:\n%s", c.env.CCM.Logs(40))
	}
}

// lbPath finds the Load Balancer of a Load Balancer API call's path.
var lbPath = regexp.MustCompile(`/lbs/([0-9a-f-]{36})`)

// lbWrites are the calls that change a live Load Balancer: its
// attachments, its settings, its frontends and backends.
var lbWrites = []emulator.Op{emulator.OpAttachLBPrivateNetwork, emulator.OpDetachLBPrivateNetwork, emulator.OpUpdateLB,
	emulator.OpMigrateLB, emulator.OpCreateFrontend, emulator.OpUpdateFrontend, emulator.OpDeleteFrontend,
	emulator.OpCreateBackend, emulator.OpUpdateBackend, emulator.OpDeleteBackend, emulator.OpSetBackendServers,
	emulator.OpUpdateHealthCheck, emulator.OpSetACLs}

// summary says what the real CCM did in the emulator (its calls answered
// 2xx, from the request log) and how its replicas fared.
func (c *ccmChaos) summary() string {
	created, deleted, writes, calls := 0, 0, 0, 0
	updated := map[string]bool{}
	for _, r := range c.env.Emu.Requests() {
		if !testenv.IsCCM(r) {
			continue
		}
		calls++
		if r.Status < 200 || r.Status > 299 {
			continue
		}
		switch {
		case r.Op == emulator.OpCreateLB:
			created++
		case r.Op == emulator.OpDeleteLB:
			deleted++
		case slices.Contains(lbWrites, r.Op):
			writes++
			if m := lbPath.FindStringSubmatch(r.Path); m != nil {
				updated[m[1]] = true
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A leader that lost its lease (a renewal late on a busy machine) may
	// still finish a sync while the next one leads: two writers of one
	// Service, whose patches go by name only.
	lost := len(c.env.CCM.Lines("leaderelection lost")) + len(c.env.CCM.Lines("failed to renew lease"))
	return fmt.Sprintf("  the Scaleway CCM (%d replicas, leader election): killed %s; Load Balancers created %d, updated %d (%d writes: attaches, frontends, backends...), deleted %d; %d calls in all; leases lost without a kill: %d\n",
		ccmReplicas, strings.TrimSpace(c.kill), created, len(updated), writes, deleted, calls, lost)
}
