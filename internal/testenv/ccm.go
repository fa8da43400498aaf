package testenv

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/ccmprocess"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/cloudcontroller"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
)

// Nodes is how many Nodes Start registers for the CCM's backends, each
// with an address booked in the "nodes" network.
const Nodes = 2

// ccmLease are the lease timings of two or more CCM replicas: short, so
// that a killed leader's work resumes within seconds; a renew deadline well
// under the lease, since a CCM that fails to renew exits.
var ccmLease = ccmprocess.LeaderElection{LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second}

// ccmReplicas are the running Scaleway CCM processes, or the v0.35 fake
// that RunOldCCM runs in their place.
type ccmReplicas struct {
	mu         sync.Mutex
	kubeconfig []byte
	procs      []*ccmprocess.Process
	all        []*ccmprocess.Process // every process started, for CCMLogs
	stopOld    func()
	nodes      bool
}

// startCCM grants the CCM its shipped RBAC, registers the Nodes once, and
// starts Options.CCMReplicas processes of bin/scaleway-cloud-controller-manager.
// One runs with --leader-elect=false: the CCM does not release its lease
// when stopped, so a restarted lone replica would wait out the old lease,
// and a lone replica has nobody to hand over to. Two or more run leader
// election as shipped, with short leases (ccmLease).
func (e *Env) startCCM() error {
	ctx := context.Background()
	e.ccm.mu.Lock()
	defer e.ccm.mu.Unlock()
	if e.ccm.kubeconfig == nil {
		if err := ccmprocess.Grant(ctx, e.Kube); err != nil {
			return err
		}
		kubeconfig, err := e.Kubeconfig(ccmprocess.User, ccmprocess.Groups...)
		if err != nil {
			return err
		}
		e.ccm.kubeconfig = kubeconfig
	}
	if !e.ccm.nodes {
		if err := ccmprocess.BookAndRegisterNodes(ctx, e.Kube, e.Emu, e.PNs["nodes"].ID, Nodes); err != nil {
			return err
		}
		e.ccm.nodes = true
	}
	var le *ccmprocess.LeaderElection
	if e.o.CCMReplicas > 1 {
		le = &ccmLease
	}
	for i := range e.o.CCMReplicas {
		p, err := ccmprocess.Start(ccmprocess.Options{
			Binary: filepath.Join(e.o.Root, "bin", "scaleway-cloud-controller-manager"), Kubeconfig: e.ccm.kubeconfig,
			Dir: e.tmp, Name: fmt.Sprintf("ccm-%d.%d", i, len(e.ccm.all)), APIURL: e.Emu.URL(), AccessKey: AccessKey, SecretKey: SecretKey,
			ProjectID: scalewaytest.DefaultProjectID, PrivateNetworkID: e.PNs["nodes"].ID, Prefix: "testenv-",
			LeaderElection: le, Log: e.ccmLog(),
		})
		if err != nil {
			return err
		}
		e.ccm.procs, e.ccm.all = append(e.ccm.procs, p), append(e.ccm.all, p)
	}
	return nil
}

// ccmLog is where the CCM's output goes besides its file: Options.Logs
// when a suite keeps them, stderr with VerboseEnv.
func (e *Env) ccmLog() io.Writer {
	if e.o.Logs == nil && !Verbose() {
		return nil
	}
	return e.logs()
}

// stopCCM stops the CCM processes (SIGTERM, then SIGKILL) or the v0.35
// fake.
func (e *Env) stopCCM() {
	e.ccm.mu.Lock()
	defer e.ccm.mu.Unlock()
	for _, p := range e.ccm.procs {
		p.Stop()
	}
	e.ccm.procs = nil
	if e.ccm.stopOld != nil {
		e.ccm.stopOld()
		e.ccm.stopOld = nil
	}
}

// CCMs are the running CCM processes (none while RunOldCCM's fake runs).
func (e *Env) CCMs() []*ccmprocess.Process {
	e.ccm.mu.Lock()
	defer e.ccm.mu.Unlock()
	return append([]*ccmprocess.Process(nil), e.ccm.procs...)
}

// RestartCCM stops the CCM (or RunOldCCM's fake) and starts the real one
// again, as when the control plane is upgraded in place: the new processes
// remember nothing and sync every Service again.
func (e *Env) RestartCCM() error {
	e.stopCCM()
	return e.startCCM()
}

// RunOldCCM replaces the CCM with a fake of one older than v0.36.0, which
// ignores private-ip-ids (cloudcontroller with IgnorePrivateIPIDs): the
// real v0.35 is not built here, and the convergence monitor's scenario
// needs what such a cluster shows. RestartCCM brings the real one back.
func (e *Env) RunOldCCM() error {
	e.stopCCM()
	logs := e.logs()
	old, err := cloudcontroller.New(cloudcontroller.Options{
		Kube: e.Kube, Scaleway: e.ScalewayOptions(), ClusterPrivateNetworkID: e.PNs["nodes"].ID, Delay: 300 * time.Millisecond,
		IgnorePrivateIPIDs: true, Logf: func(format string, args ...any) { fmt.Fprintf(logs, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); old.Run(ctx) }()
	e.ccm.mu.Lock()
	e.ccm.stopOld = func() { cancel(); <-done }
	e.ccm.mu.Unlock()
	return nil
}

// CCMLogs is the last n lines of each CCM process's log, headed by its
// file: what a failing test prints.
func (e *Env) CCMLogs(n int) string {
	e.ccm.mu.Lock()
	defer e.ccm.mu.Unlock()
	var b strings.Builder
	for _, p := range e.ccm.all {
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", p.LogPath, n, p.Tail(n))
	}
	return b.String()
}
