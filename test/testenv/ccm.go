package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/ccmprocess"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/oldccm"
)

// Nodes is how many Nodes Start registers for the CCM's backends, each
// with an address booked in the "nodes" network.
const Nodes = 2

// CCMPrefix is the CCM's SCW_CCM_PREFIX: its Load Balancers are named
// CCMPrefix and the Service's UID.
const CCMPrefix = "testenv-"

// ccmLease are the lease timings of two or more CCM replicas: short, so
// that a killed leader's work resumes within seconds; a renew deadline well
// under the lease, since a CCM that fails to renew exits.
var ccmLease = ccmprocess.LeaderElection{LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second}

// CCM is the cluster's Scaleway CCM: its running processes, or the v0.35
// fake that RunOld runs in their place.
type CCM struct {
	env *Env
	// Gate is where the CCM's processes reach the apiserver.
	Gate       *Gate
	mu         sync.Mutex
	kubeconfig []byte
	procs      []*ccmprocess.Process
	all        []*ccmprocess.Process // every process started, for CCMLogs
	stopOld    func()
	nodes      bool
}

// start grants the CCM its shipped RBAC, registers the Nodes once, and
// starts Options.CCMReplicas processes of bin/scaleway-cloud-controller-manager.
// One runs with --leader-elect=false: the CCM does not release its lease
// when stopped, so a restarted lone replica would wait out the old lease,
// and a lone replica has nobody to hand over to. Two or more run leader
// election as shipped, with short leases (ccmLease).
func (c *CCM) start() error {
	e := c.env
	ctx := context.Background()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kubeconfig == nil {
		if err := ccmprocess.Grant(ctx, e.Kube); err != nil {
			return err
		}
		cfg, err := e.UserConfig(ccmprocess.User, ccmprocess.Groups...)
		if err != nil {
			return err
		}
		gate, err := newGate(cfg)
		if err != nil {
			return err
		}
		kubeconfig, err := gate.kubeconfig()
		if err != nil {
			gate.close()
			return err
		}
		c.Gate, c.kubeconfig = gate, kubeconfig
	}
	if !c.nodes {
		if err := ccmprocess.BookAndRegisterNodes(ctx, e.Kube, e.Emu, e.PNs["nodes"].ID, Nodes); err != nil {
			return err
		}
		c.nodes = true
	}
	for i := range e.o.CCMReplicas {
		p, err := c.startReplica(i)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
	}
	return nil
}

// startCCMReplica starts the process of replica i. c.mu is held.
func (c *CCM) startReplica(i int) (*ccmprocess.Process, error) {
	e := c.env
	var le *ccmprocess.LeaderElection
	if e.o.CCMReplicas > 1 {
		le = &ccmLease
	}
	p, err := ccmprocess.Start(ccmprocess.Options{
		Binary: filepath.Join(e.o.Root, "bin", "scaleway-cloud-controller-manager"), Kubeconfig: c.kubeconfig,
		Dir: e.tmp, Name: fmt.Sprintf("ccm-%d.%d", i, len(c.all)), APIURL: e.Emu.URL(), AccessKey: AccessKey, SecretKey: SecretKey,
		ProjectID: emulator.DefaultProjectID, PrivateNetworkID: e.PNs["nodes"].ID, Prefix: CCMPrefix,
		LeaderElection: le, Log: e.ccmLog(),
	})
	if err != nil {
		return nil, err
	}
	c.all = append(c.all, p)
	return p, nil
}

// Kill kills CCM replica i with SIGKILL, as a node failure ends a pod
// (its lease stays until it expires, and another replica waits that long
// to lead), and after down starts a new process in its place, as its
// Deployment would.
func (c *CCM) Kill(i int, down time.Duration) error {
	c.mu.Lock()
	if i >= len(c.procs) {
		c.mu.Unlock()
		return fmt.Errorf("no CCM replica %d: %d run", i, len(c.procs))
	}
	killed := c.procs[i]
	killed.Kill()
	c.mu.Unlock()
	time.Sleep(down)
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.procs) || c.procs[i] != killed {
		return nil // stopped or restarted meanwhile: nothing to bring back
	}
	p, err := c.startReplica(i)
	if err != nil {
		return err
	}
	c.procs[i] = p
	return nil
}

// stop stops the CCM processes (SIGTERM, then SIGKILL) or the v0.35
// fake.
func (c *CCM) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		p.Stop()
	}
	c.procs = nil
	if c.stopOld != nil {
		c.stopOld()
		c.stopOld = nil
	}
}

// Stop stops the CCM's processes, as a cluster whose CCM is down: Services
// are admitted and no Load Balancer is made for them until Start.
func (c *CCM) Stop() { c.stop() }

// Start starts the CCM's processes again after Stop: they remember nothing
// and sync every Service.
func (c *CCM) Start() error { return c.start() }

// Processes are the running CCM processes (none while RunOld's fake runs).
func (c *CCM) Processes() []*ccmprocess.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*ccmprocess.Process(nil), c.procs...)
}

// Restart stops the CCM (or RunOld's fake) and starts the real one
// again, as when the control plane is upgraded in place: the new processes
// remember nothing and sync every Service again.
func (c *CCM) Restart() error {
	c.stop()
	return c.start()
}

// RunOld replaces the CCM with a fake of one older than v0.36.0, which
// ignores private-ip-ids (test/oldccm): the
// real v0.35 is not built here, and the convergence monitor's scenario
// needs what such a cluster shows. Restart brings the real one back.
func (c *CCM) RunOld() error {
	c.stop()
	e := c.env
	logs := e.logs()
	old, err := oldccm.New(oldccm.Options{
		Kube: e.Kube, Scaleway: e.ScalewayOptions(), ClusterPrivateNetworkID: e.PNs["nodes"].ID, Delay: 300 * time.Millisecond,
		Logf: func(format string, args ...any) { fmt.Fprintf(logs, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); old.Run(ctx) }()
	c.mu.Lock()
	c.stopOld = func() { cancel(); <-done }
	c.mu.Unlock()
	return nil
}

// Logs is the last n lines of each CCM process's log, headed by its
// file: what a failing test prints.
func (c *CCM) Logs(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.all {
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", p.LogPath, n, p.Tail(n))
	}
	return b.String()
}

// Lines are the lines of every CCM process's log, from its start, that
// contain substr: what a check reads as the CCM's own account.
func (c *CCM) Lines(substr string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.all {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, substr) {
				out = append(out, strings.TrimRight(line, "\n"))
			}
		}
	}
	return out
}

// ccmLog is where the CCM's output goes besides its file: Options.Logs
// when a suite keeps them, stderr with VerboseEnv.
func (e *Env) ccmLog() io.Writer {
	if e.o.Logs == nil && !Verbose() {
		return nil
	}
	return e.logs()
}
