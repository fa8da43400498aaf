package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// The environment the host side hands the node side (the same test binary,
// started again inside the namespaces).
const (
	envDir    = "SCW_LB_IPAM_E2E_DIR"    // the run's temporary directory
	envCgroup = "SCW_LB_IPAM_E2E_CGROUP" // the kubelet's cgroupRoot, made by the host side
)

// runPrefix names a run's network namespace and cgroup, before the host
// side's PID: runs in several work trees at once do not meet.
const runPrefix = "scw-lb-ipam-e2e-"

// removeInterrupted removes what runs killed before their cleanup left (a
// network namespace and cgroups named after a PID that is gone), with
// their processes, and says so.
func removeInterrupted() {
	names := map[string]bool{}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		names[e.Name()] = true
	}
	if hs, err := cgroupHierarchies(); err == nil {
		for _, h := range hs {
			dirs, _ := os.ReadDir(h)
			for _, d := range dirs {
				names[d.Name()] = true
			}
		}
	}
	for name := range names {
		pid, err := strconv.Atoi(strings.TrimPrefix(name, runPrefix))
		if !strings.HasPrefix(name, runPrefix) || err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // a run going on
		}
		h := &host{netns: name, cgroup: "/" + name}
		for _, p := range h.processes(inode("/run/netns/"+name), 0) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(500 * time.Millisecond)
		_ = exec.Command("ip", "netns", "delete", name).Run()
		if err := removeCgroup(h.cgroup); err != nil {
			fmt.Printf("e2e: an interrupted run left %s: could not remove all of it: %v\n", name, err)
			continue
		}
		fmt.Printf("e2e: removed what an interrupted run left: %s (its network namespace, processes and cgroups)\n", name)
	}
}

// kubeletSysctls are the kernel settings outside any namespace that the
// kubelet sets at start (setupKernelTunables) and containerd may raise: the
// host side restores them.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"fs/inotify/max_user_watches", "fs/inotify/max_user_instances",
}

// hostPrograms are what make e2e installs from Debian (containerd, runc,
// containernetworking-plugins, iptables, jq: the install guide uses it)
// or Debian always has.
var hostPrograms = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip", "nsenter", "unshare", "jq", "bash"}

// cniPlugins are the CNI plugins the node's network uses.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

const cniBinDir = "/usr/lib/cni"

// host is the machine's side of a run: it makes the network namespace and
// the kubelet's cgroup, runs the node side inside them, and afterwards
// checks and restores everything the run could have changed.
type host struct {
	tmp    string
	netns  string // name under /run/netns
	cgroup string // "/" + name, in every cgroup hierarchy
	before snapshot
}

// snapshot is the host state a run must leave as it found it.
type snapshot struct {
	sysctls  map[string]string
	mounts   []string // mount points under the places a node writes
	netns    []string // /run/netns
	links    []string
	iptables string
}

// runHost runs the suite: the node side does the tests, in the namespaces
// this side made; whatever it leaves behind fails the run.
func runHost() int {
	if ok, err := localrun.Root("e2e", "it makes a network namespace, mounts and cgroups"); !ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		return 0
	}
	if err := checkPrerequisites(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	removeInterrupted()
	name := fmt.Sprintf("%s%d", runPrefix, os.Getpid())
	h := &host{netns: name, cgroup: "/" + name}
	var err error
	if h.before, err = takeSnapshot(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: reading the host's state:", err)
		return 1
	}
	if h.tmp, err = os.MkdirTemp("", name+"-"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := h.run()
	problems := h.cleanUp()
	if len(problems) > 0 {
		fmt.Println("e2e: the run left this on the host (now removed where it could be):")
		for _, p := range problems {
			fmt.Println("  -", p)
		}
		fmt.Println("FAIL")
		return 1
	}
	fmt.Println("e2e: host clean: no process, mount, network namespace, cgroup, link, iptables rule or changed kernel setting left")
	return code
}

func checkPrerequisites() error {
	var missing []string
	for _, p := range hostPrograms {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing on this machine: %s; `make e2e` installs them (apt-get install containerd runc containernetworking-plugins iptables)", strings.Join(missing, ", "))
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "helm", "scaleway-cloud-controller-manager"} {
		if _, err := os.Stat(filepath.Join(repoRoot, "bin", b)); err != nil {
			return fmt.Errorf("bin/%s is missing: run `make e2e`, which builds it", b)
		}
	}
	for _, f := range []string{"oci/index.json", "index.digest"} {
		if _, err := os.Stat(filepath.Join(repoRoot, "bin", "image", f)); err != nil {
			return fmt.Errorf("bin/image/%s is missing: run `make image` (make e2e does it)", f)
		}
	}
	return nil
}

// run makes the namespace and the cgroup, then runs this test binary again
// inside a new mount namespace in that network namespace: every mount the
// node makes (overlays, volumes, the bind mounts that hide /run and /var)
// goes with the mount namespace when its last process ends.
func (h *host) run() int {
	if out, err := exec.Command("ip", "netns", "add", h.netns).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: ip netns add %s: %v: %s\n", h.netns, err, out)
		return 1
	}
	if err := makeCgroup(h.cgroup); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: making the kubelet's cgroup root:", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	args := append([]string{"--net=/run/netns/" + h.netns, "--", "unshare", "--mount", "--propagation", "slave", "--", exe}, os.Args[1:]...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(os.Environ(), envDir+"="+h.tmp, envCgroup+"="+h.cgroup)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the node side:", err)
		return 1
	}
	// An interrupted run still tears down: the node side stops its
	// processes on the signal, and this side cleans up after it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "e2e: the node side:", err)
		return 1
	}
	return 0
}

// cleanUp stops what the node side left running, removes the namespace
// and the cgroup, restores the kernel settings, and says what it found
// that should not have been there.
func (h *host) cleanUp() []string {
	var problems []string
	netnsIno := inode("/run/netns/" + h.netns)
	mntIno := readInode(filepath.Join(h.tmp, mntnsFile))
	for range 3 {
		left := h.processes(netnsIno, mntIno)
		if len(left) == 0 {
			break
		}
		for _, p := range left {
			problems = append(problems, "process "+p.String())
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(time.Second)
	}
	if err := removeCgroup(h.cgroup); err != nil {
		problems = append(problems, err.Error())
	}
	// The kubelet changes these at every start, by design: restored, and
	// said, not counted as left behind.
	var restored []string
	for _, k := range kubeletSysctls {
		if v := readSysctl(k); v != h.before.sysctls[k] {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(h.before.sysctls[k]), 0o644); err != nil {
				problems = append(problems, fmt.Sprintf("kernel setting %s is %s, was %s, and could not be restored: %v", k, v, h.before.sysctls[k], err))
				continue
			}
			restored = append(restored, fmt.Sprintf("%s back to %s from %s", strings.ReplaceAll(k, "/", "."), h.before.sysctls[k], v))
		}
	}
	if len(restored) > 0 {
		fmt.Printf("e2e: restored the kernel settings the kubelet changed: %s\n", strings.Join(restored, ", "))
	}
	if out, err := exec.Command("ip", "netns", "delete", h.netns).CombinedOutput(); err != nil {
		problems = append(problems, fmt.Sprintf("network namespace %s: ip netns delete: %v: %s", h.netns, err, out))
	}
	if err := os.RemoveAll(h.tmp); err != nil {
		problems = append(problems, fmt.Sprintf("temporary directory %s: %v", h.tmp, err))
	}
	after, err := takeSnapshot()
	if err != nil {
		return append(problems, "reading the host's state: "+err.Error())
	}
	for _, k := range kubeletSysctls {
		if after.sysctls[k] != h.before.sysctls[k] {
			problems = append(problems, fmt.Sprintf("kernel setting %s is %s, was %s", k, after.sysctls[k], h.before.sysctls[k]))
		}
	}
	problems = append(problems, h.added("mount", h.before.mounts, after.mounts)...)
	problems = append(problems, h.added("network namespace", h.before.netns, after.netns)...)
	problems = append(problems, h.added("link", h.before.links, after.links)...)
	if after.iptables != h.before.iptables {
		problems = append(problems, fmt.Sprintf("the host's iptables rules changed:\nbefore:\n%s\nafter:\n%s", h.before.iptables, after.iptables))
	}
	return problems
}

// added are the entries of after not in before, but those of other runs
// going on at the same time.
func (h *host) added(what string, before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) && (!strings.Contains(a, runPrefix) || strings.Contains(a, h.netns)) {
			out = append(out, what+" "+a)
		}
	}
	return out
}

func takeSnapshot() (snapshot, error) {
	s := snapshot{sysctls: map[string]string{}}
	for _, k := range kubeletSysctls {
		s.sysctls[k] = readSysctl(k)
	}
	var err error
	if s.mounts, err = hostMounts(); err != nil {
		return s, err
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		s.netns = append(s.netns, e.Name())
	}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return s, fmt.Errorf("ip link show: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			s.links = append(s.links, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			return s, fmt.Errorf("iptables -t %s -S: %w", table, err)
		}
		s.iptables += string(out)
	}
	return s, nil
}

// hostMounts are this mount namespace's mount points where a node (its
// kubelet, containerd, runc, CNI plugins) would leave one.
func hostMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if mp == "/run/netns" {
			continue // iproute2 makes it a mount point at its first netns, for good
		}
		for _, under := range []string{"/run", "/var", "/tmp", "/sys/fs/cgroup", "/opt", "/etc"} {
			if mp == under || strings.HasPrefix(mp, under+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Strings(out)
	return out, sc.Err()
}

func readSysctl(k string) string {
	b, _ := os.ReadFile(filepath.Join("/proc/sys", k))
	return strings.TrimSpace(string(b))
}

// process is a leftover, with why it counts as the run's.
type process struct {
	pid     int
	why     string
	cmdline string
}

func (p process) String() string { return fmt.Sprintf("%d (%s): %s", p.pid, p.why, p.cmdline) }

// processes are those in the run's network or mount namespace or in the
// kubelet's cgroup: containers run in namespaces of their own, but always
// under that cgroup.
func (h *host) processes(netnsIno, mntIno uint64) []process {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []process
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		why := ""
		switch {
		case netnsIno != 0 && nsInode(filepath.Join(d, "ns", "net")) == netnsIno:
			why = "in the network namespace"
		case mntIno != 0 && nsInode(filepath.Join(d, "ns", "mnt")) == mntIno:
			why = "in the mount namespace"
		default:
			cg, _ := os.ReadFile(filepath.Join(d, "cgroup"))
			if strings.Contains(string(cg), ":"+h.cgroup+"/") || strings.Contains(string(cg), ":"+h.cgroup+"\n") {
				why = "in the kubelet's cgroup"
			}
		}
		if why == "" {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		out = append(out, process{pid: pid, why: why, cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

// nsInode is the inode of a namespace link ("net:[4026532281]").
func nsInode(link string) uint64 {
	s, err := os.Readlink(link)
	if err != nil {
		return 0
	}
	i := strings.IndexByte(s, '[')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSuffix(s[i+1:], "]"), 10, 64)
	return n
}

func inode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

func readInode(path string) uint64 {
	b, _ := os.ReadFile(path)
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers, the
// named systemd one, the unified one of a hybrid setup, or the single v2).
func cgroupHierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, " - "); i >= 0 {
			f, rest := strings.Fields(line[:i]), strings.Fields(line[i+3:])
			if len(f) > 4 && len(rest) > 0 && (rest[0] == "cgroup" || rest[0] == "cgroup2") && strings.HasPrefix(f[4], "/sys/fs/cgroup") {
				out = append(out, f[4])
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	return out, nil
}

// makeCgroup makes the kubelet's cgroupRoot in every hierarchy (the kubelet
// requires it to exist), with cpuset's CPUs and memory nodes from the
// parent, which a new cpuset lacks.
func makeCgroup(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroup removes the cgroup root and what the kubelet and runc made
// under it, deepest first; a cgroup with a process left cannot go.
func removeCgroup(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var left []string
	for _, h := range hs {
		root := filepath.Join(h, name)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 10 {
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				left = append(left, fmt.Sprintf("%s (%v)", dirs[i], err))
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups %s", strings.Join(left, ", "))
	}
	return nil
}
