package ccmprocess

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configures Start.
type Options struct {
	// Binary is bin/scaleway-cloud-controller-manager.
	Binary string
	// Kubeconfig is User's (see Grant and Groups): the CCM's own identity,
	// not an admin's.
	Kubeconfig []byte
	// Dir receives the replica's kubeconfig and log; the caller removes it.
	Dir string
	// Name names the replica's files, Dir/Name.kubeconfig and Dir/Name.log.
	Name string
	// APIURL is the Scaleway API's (the emulator's); AccessKey, SecretKey
	// and ProjectID its credentials, Zone (fr-par-1 when empty) the Load
	// Balancers' and, through its region, IPAM's.
	APIURL, AccessKey, SecretKey, ProjectID, Zone string
	// PrivateNetworkID is PN_ID, the nodes' Private Network: without it the
	// CCM ignores pn-ids and private-ip-ids.
	PrivateNetworkID string
	// Prefix is SCW_CCM_PREFIX, the start of its Load Balancers' names.
	Prefix string
	// LeaderElection, when set, runs it with leader election as shipped
	// (on, a Lease in kube-system) with these timings; nil runs
	// --leader-elect=false, for a lone replica (see LeaderElection).
	LeaderElection *LeaderElection
	// Log, when set, receives the output too (the file always does).
	Log io.Writer
}

// LeaderElection are the lease timings of --leader-elect=true. The CCM does
// not release its lease on SIGTERM and exits when it fails to renew it: a
// short lease lets a second replica take over soon after a kill, a renew
// deadline well under it survives a loaded machine's pauses.
type LeaderElection struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// UserAgent is in the User-Agent of every Scaleway call of the CCM:
// scaleway/cloud.go adds "scaleway/ccm <version> (<commit>)" after the
// SDK's own "scaleway-sdk-go/<version> (...)". A suite tells its calls from
// the webhook's by it in the emulator's request log.
const UserAgent = " scaleway/ccm "

// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 10 * time.Second

// Process is a running CCM replica.
type Process struct {
	// LogPath is the file holding its output.
	LogPath string
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
	err     error // Wait's, once done is closed
}

// Args are the flags the CCM runs with: the shipped Deployment's
// (--cloud-provider=scaleway, --allow-untagged-cloud, --leader-elect) and
// the kubeconfig, only the service controller, and no HTTPS listeners
// (--secure-port=0, --webhook-secure-port=0), so that replicas and suites
// side by side need no ports.
func (o Options) Args(kubeconfig string) []string {
	args := []string{"--cloud-provider=scaleway", "--allow-untagged-cloud", "--kubeconfig=" + kubeconfig,
		"--controllers=service", "--secure-port=0", "--webhook-secure-port=0", "--v=2"}
	if le := o.LeaderElection; le != nil {
		return append(args, "--leader-elect=true", "--leader-elect-lease-duration="+le.LeaseDuration.String(),
			"--leader-elect-renew-deadline="+le.RenewDeadline.String(), "--leader-elect-retry-period="+le.RetryPeriod.String())
	}
	return append(args, "--leader-elect=false")
}

// Env is the CCM's environment, all of it: nothing of the caller's (no
// SCW_* profile of the user's leaks in). The instances and zones interfaces
// are off (no Instance API here: Nodes come from RegisterNodes) and so is
// the tags sync.
func (o Options) Env() []string {
	zone := o.Zone
	if zone == "" {
		zone = "fr-par-1"
	}
	region := zone[:len(zone)-2] // fr-par-1 → fr-par
	return []string{"HOME=" + o.Dir, "PATH=/usr/bin:/bin",
		"SCW_API_URL=" + o.APIURL, "SCW_ACCESS_KEY=" + o.AccessKey, "SCW_SECRET_KEY=" + o.SecretKey,
		"SCW_DEFAULT_PROJECT_ID=" + o.ProjectID, "SCW_DEFAULT_REGION=" + region, "SCW_DEFAULT_ZONE=" + zone,
		"PN_ID=" + o.PrivateNetworkID, "DISABLE_INTERFACES=instances,zones", "DISABLE_TAGS_SYNC=true",
		"SCW_CCM_PREFIX=" + o.Prefix}
}

// Start runs the CCM in a process group of its own, its output in
// Dir/Name.log (and Options.Log). Call Stop or Kill.
func Start(o Options) (*Process, error) {
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("the Scaleway CCM %s is missing: run `make tools` (make test does it): %w", o.Binary, err)
	}
	kubeconfig := filepath.Join(o.Dir, o.Name+".kubeconfig")
	if err := os.WriteFile(kubeconfig, o.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	p := &Process{LogPath: filepath.Join(o.Dir, o.Name+".log"), done: make(chan struct{})}
	var err error
	if p.log, err = os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	var out io.Writer = p.log
	if o.Log != nil {
		out = io.MultiWriter(p.log, o.Log)
	}
	p.cmd = exec.Command(o.Binary, o.Args(kubeconfig)...)
	p.cmd.Env, p.cmd.Dir = o.Env(), o.Dir
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.log.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process's ID (and its group's).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop ends the process group with SIGTERM, then SIGKILL after
// StopTimeout, and waits for it.
func (p *Process) Stop() {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(StopTimeout):
		p.Kill()
	}
}

// Kill ends the process group with SIGKILL, as a killed pod ends (its lease
// is not released), and waits for it.
func (p *Process) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

func (p *Process) signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "ccmprocess: %s to the CCM's group %s: %v\n", sig, strconv.Itoa(p.PID()), err)
	}
}

// Leads reports whether the process acquired the leader-election lease
// (its log says so; it exits when it loses it), or runs without leader
// election.
func (p *Process) Leads() bool {
	if exited, _ := p.Exited(); exited {
		return false
	}
	if !slices.Contains(p.cmd.Args, "--leader-elect=true") {
		return true
	}
	b, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(string(b), "Successfully acquired lease")
}

// Tail is the last n lines of the log, for a failure message.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.LogPath, err)
	}
	return lastLines(string(b), n)
}
