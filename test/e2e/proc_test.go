package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// proc is one of the node's processes, its output in logs/NAME.log.
type proc struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// start starts a process of the node. Its own process group keeps a
// terminal's Ctrl-C from reaching it before the teardown does; the parent
// death signal stops it if this process dies without one.
func (n *node) start(name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, log: n.path("logs", name+".log"), exited: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	n.procs[name] = p
	n.order = append(n.order, name)
	return p, nil
}

func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "e2e: %s still running %s after SIGTERM: killed\n", p.name, grace)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail is the end of the process's log, for a failure message.
func (p *proc) tail(lines int) string {
	b, _ := os.ReadFile(p.log)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitFor polls done until it holds, p exits or the timeout passes; the
// error names what was awaited and ends with p's log. An error of done
// does not end the wait (the next poll may succeed): a timeout quotes the
// last one.
func (n *node) waitFor(what string, timeout time.Duration, p *proc, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	exited := false
	held := localrun.Poll(timeout, 250*time.Millisecond, func() bool {
		ok, err := done(ctx)
		if err != nil {
			last = err
		}
		exited = !ok && !p.running()
		return ok || exited
	})
	switch {
	case exited:
		return fmt.Errorf("%s exited (%v) while waiting for %s; the end of %s:\n%s", p.name, p.err, what, p.log, p.tail(30))
	case !held:
		return fmt.Errorf("timed out after %s waiting for %s (last error: %v); the end of %s:\n%s", timeout, what, last, p.log, p.tail(30))
	}
	return nil
}
