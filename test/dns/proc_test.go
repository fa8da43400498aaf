package dns

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long a process has to exit after SIGTERM before its
// group is killed.
const stopGrace = 10 * time.Second

// proc is a process the suite started (named, external-dns), its output
// in a log file for a failure message.
type proc struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProc starts bin in a process group of its own, so that stop
// reaches whatever it forks and a terminal's Ctrl-C does not reach it
// before the teardown does; the parent death signal stops it if the test
// binary dies without a teardown.
func startProc(name, log, bin string, args ...string) (*proc, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, log: log, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace.
func (p *proc) stop() {
	if p == nil || !p.running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		fmt.Fprintf(os.Stderr, "dns: %s still running %s after SIGTERM: killed\n", p.name, stopGrace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
}

// logTail is the last tailBytes of the process's log, for a failure
// message.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	return fmt.Sprintf("%s log (%s), its end:\n%s", p.name, p.log, b)
}

const tailBytes = 3000
