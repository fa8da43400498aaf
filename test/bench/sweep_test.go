package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/inventory"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/servicecache"
	"github.com/scw-lb-ipam/scw-lb-ipam/sweeper"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// sweepChildEnv, when set, makes the test binary the sweeper's child (see
// TestMain); its value is the JSON of sweepParams.
const sweepChildEnv = "SCW_LB_IPAM_BENCH_SWEEP_CHILD"

// sweepProfileEnv, when set to a directory, makes the child write heap
// profiles there: heap-before.pprof right before the cycle and
// heap-after.pprof right after it (go tool pprof -sample_index=alloc_space
// -base heap-before.pprof heap-after.pprof shows what the cycle allocated).
const sweepProfileEnv = "SCW_LB_IPAM_BENCH_SWEEP_PROFILE"

// sweepParams tell the child where the emulator is and what it holds. The
// IPs' IDs, addresses and Services follow from the index (sweepIPID,
// sweepService), so the child rebuilds the live Services without being
// sent them.
type sweepParams struct {
	URL       string `json:"url"`
	ClusterPN string `json:"clusterPN"`
	PoolPN    string `json:"poolPN"`
	N         int    `json:"n"`
	// The first Orphans IPs have no Service and are past their retention.
	Orphans int `json:"orphans"`
}

// sweepResult is the child's answer, its last line on stdout.
type sweepResult struct {
	Wall       time.Duration `json:"wall"`
	Scanned    int           `json:"scanned"`
	Referenced int           `json:"referenced"`
	Released   int           `json:"released"`
	Errors     int           `json:"errors"`
	// RSSBefore is resident memory right before the cycle (runtime, Cloud
	// client and the Service list); HWM the peak during the cycle, the
	// kernel's VmHWM reset before it (or since start, when it cannot be).
	RSSBefore uint64 `json:"rssBefore"`
	// HeapBefore is the live heap then, mostly the Service list.
	HeapBefore uint64 `json:"heapBefore"`
	HWM        uint64 `json:"hwm"`
	HWMReset   bool   `json:"hwmReset"`
}

// sweepRow is one measured cycle, as the table prints it.
type sweepRow struct {
	n, orphans       int
	res              sweepResult
	counts           map[emulator.Op]int
	emulatorCPU      time.Duration
	seed, childTotal time.Duration
}

const (
	sweepCluster = "bench"
	sweepNS      = "ns"
	// A /14 holds the 100,000 reservations.
	sweepPoolCIDR = "10.16.0.0/14"
)

// sweepIPID is the IPAM ID of the i-th reservation: a fixed UUID, so the
// child names the same IDs in its Services.
func sweepIPID(i int) string { return fmt.Sprintf("5eeb0000-0000-4000-8000-%012x", i) }

func sweepName(i int) string { return "svc-" + strconv.Itoa(i) }

func sweepAddr(i int) netip.Addr {
	v := uint32(10)<<24 | 16<<16 + 2 + uint32(i) // past IPAM's first two
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// sweepService is the live Service referencing the i-th reservation, as the
// apiserver returns it for a LoadBalancer Service the CCM has served
// (cluster IP, one port, selector, an ingress), less managedFields; the
// Service informer holds its servicecache.Record.
func sweepService(i int) corev1.Service {
	name := sweepName(i)
	v := uint32(10)<<24 | 96<<16 + uint32(i)
	clusterIP := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
	single := corev1.IPFamilyPolicySingleStack
	local := corev1.ServiceInternalTrafficPolicyCluster
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: sweepNS, Name: name, UID: types.UID("uid-" + name),
			ResourceVersion: strconv.Itoa(1000 + i), CreationTimestamp: metav1.Now(),
			Labels:      map[string]string{"app.kubernetes.io/name": name},
			Annotations: map[string]string{request.AnnotationPool: "general", ccm.AnnotationPrivateIPIDs: sweepIPID(i)},
			Finalizers:  []string{ccm.FinalizerLoadBalancerCleanup}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app.kubernetes.io/name": name},
			Ports:     []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30000 + int32(i%2000)}},
			ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
			SessionAffinity: corev1.ServiceAffinityNone, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, InternalTrafficPolicy: &local},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: sweepAddr(i).String()}}}},
	}
}

func sweepConfig(p sweepParams) string {
	return fmt.Sprintf("clusterName: %s\nregion: fr-par\nclusterPrivateNetworkID: %s\npools:\n  - {name: general, privateNetworkID: %s, retention: 1h}\n", sweepCluster, p.ClusterPN, p.PoolPN)
}

// sweepCycle seeds an emulator with n reservations of this cluster, the
// first orphans of them unreferenced for two hours, and runs one sweeper
// cycle over them in a child process.
func sweepCycle(n, orphans int) (sweepRow, error) {
	row := sweepRow{n: n, orphans: orphans}
	emu := emulator.New(emulator.Options{SecretKey: testenv.SecretKey})
	if _, err := emu.Start("127.0.0.1:0"); err != nil {
		return row, err
	}
	defer emu.Close()
	nodes, err := emu.AddPrivateNetwork("nodes", "172.16.0.0/22")
	if err != nil {
		return row, err
	}
	pool, err := emu.AddPrivateNetwork("pool", sweepPoolCIDR)
	if err != nil {
		return row, err
	}
	start := time.Now()
	old := time.Now().Add(-2 * time.Hour)
	for i := range n {
		name := sweepName(i)
		e := ipam.Entry{Cluster: sweepCluster, Pool: "general", Service: types.NamespacedName{Namespace: sweepNS, Name: name}, UID: "uid-" + name}
		if i < orphans {
			e.OrphanedSince = old
		}
		if _, err := emu.AddIPWithID(sweepIPID(i), pool.ID, sweepAddr(i), e.Tags(), nil); err != nil {
			return row, err
		}
	}
	row.seed = time.Since(start)

	params, _ := json.Marshal(sweepParams{URL: emu.URL(), ClusterPN: nodes.ID, PoolPN: pool.ID, N: n, Orphans: orphans})
	self, err := os.Executable()
	if err != nil {
		return row, err
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), sweepChildEnv+"="+string(params))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	emu.ResetCounts()
	cpu0 := selfCPU()
	start = time.Now()
	if err := cmd.Run(); err != nil {
		return row, fmt.Errorf("the sweeper child: %w", err)
	}
	row.childTotal = time.Since(start)
	// The parent's CPU while the child ran is the emulator's answering (the
	// replicas and informers of the report idle meanwhile).
	row.emulatorCPU = selfCPU() - cpu0
	row.counts = emu.Counts()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &row.res); err != nil {
		return row, fmt.Errorf("the sweeper child's answer %q: %w", stdout.String(), err)
	}
	if row.res.Scanned != n || row.res.Released != orphans || row.res.Errors != 0 {
		return row, fmt.Errorf("the cycle over %d reservations: %+v", n, row.res)
	}
	return row, nil
}

// sweepChild is the child's side: the Cloud client, the pool file and the
// Service list the leader would hold, then one timed cycle.
func sweepChild() error {
	var p sweepParams
	if err := json.Unmarshal([]byte(os.Getenv(sweepChildEnv)), &p); err != nil {
		return err
	}
	ctx := context.Background()
	cloud, err := scaleway.New(ctx, scaleway.Options{Region: "fr-par", ClientOptions: []scw.ClientOption{
		scw.WithAPIURL(p.URL), scw.WithAuth(testenv.AccessKey, testenv.SecretKey), scw.WithDefaultProjectID(emulator.DefaultProjectID)}})
	if err != nil {
		return err
	}
	cfg, err := ipam.ParseConfig([]byte(sweepConfig(p)))
	if err != nil {
		return err
	}
	if err := inventory.Resolve(ctx, cloud, cfg); err != nil {
		return err
	}
	// The Service informer's content: every live Service, one per
	// referenced reservation, as its transform (servicecache.RecordService) makes
	// it; the leader's cycle reads the Records there in place
	// (sweeper.SetupWithManager).
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for i := p.Orphans; i < p.N; i++ {
		svc := sweepService(i)
		rec, err := servicecache.RecordService(&svc)
		if err != nil {
			return err
		}
		if err := store.Add(rec); err != nil {
			return err
		}
	}
	s := sweeper.New(sweeper.Options{Cloud: cloud, Config: func() *ipam.Config { return cfg }, ServiceStore: store,
		MaxReleasesPerCycle: p.Orphans, Log: logr.Discard()})

	var res sweepResult
	// What the process holds before the cycle, garbage returned to the OS.
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapBefore = ms.HeapAlloc
	res.RSSBefore = procStatus("VmRSS")
	// Writing 5 to clear_refs resets VmHWM to the current RSS (Linux ≥ 4.0):
	// the peak read after is the cycle's.
	dir := os.Getenv(sweepProfileEnv)
	if dir != "" {
		if err := writeHeapProfile(filepath.Join(dir, "heap-before.pprof")); err != nil {
			return err
		}
	}
	res.HWMReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	start := time.Now()
	rep, err := s.Sweep(ctx)
	res.Wall = time.Since(start)
	res.HWM = procStatus("VmHWM")
	if err != nil {
		return err
	}
	if dir != "" {
		if err := writeHeapProfile(filepath.Join(dir, "heap-after.pprof")); err != nil {
			return err
		}
	}
	res.Scanned, res.Referenced, res.Released, res.Errors = rep.Scanned, rep.Referenced, len(rep.Released), rep.Errors
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// procStatus reads a kB field of /proc/self/status, in bytes.
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// selfCPU is the process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
