package playground

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/scaleway/scaleway-sdk-go/scw"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/app"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/ccmprocess"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// The playground's fake Scaleway credentials: the emulator checks them like
// the real API would, and they open nothing anywhere else.
const (
	AccessKey = "SCWPLAYGROUNDXXXXXXX"
	SecretKey = "00000000-0000-4000-8000-00000000d3a0"
	// Namespace is where the chart is installed; DemoNamespace is opted in.
	Namespace     = "scw-lb-ipam"
	DemoNamespace = "demo"
	release       = "scw-lb-ipam"
)

// Options configures Run.
type Options struct {
	// Root is the repository: bin/ (make tools), charts/ and the pool file.
	Root string
	// PoolFile is the pool file to seed and serve; default examples/pools.yaml.
	PoolFile string
	// Out receives the banner; the components log to a file in the
	// playground's temporary directory, which the banner names.
	Out io.Writer
	// Verbose logs at debug level.
	Verbose bool
}

// ExampleBYOID is the IPAM ID of examples/service-byo.yaml: the playground
// books it in the first pool's Private Network, as Terraform or the
// console would have, so that the example is admitted as written.
const ExampleBYOID = "8a7ff36c-7e00-441f-bfda-b6bdcb8ecc5f"

// exampleBYOAddress is its address: in dc-link's subnet, outside its
// ranges (pool ranges are for the webhook to hand out).
var exampleBYOAddress = netip.MustParseAddr("172.16.4.20")

// Run starts everything, prints how to use it, and stops everything when
// ctx ends, removing its temporary files.
func Run(ctx context.Context, o Options) (err error) {
	if o.PoolFile == "" {
		o.PoolFile = filepath.Join(o.Root, "examples", "pools.yaml")
	}
	bin := filepath.Join(o.Root, "bin")
	if err := testenv.RequireTools(bin, "make tools (make run does)"); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "scw-lb-ipam-playground-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logPath := filepath.Join(tmp, "scw-lb-ipam.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	level := zapcore.InfoLevel
	if o.Verbose {
		level = zapcore.DebugLevel
	}
	log := zap.New(zap.UseDevMode(true), zap.Level(level), zap.WriteTo(logFile))

	// 1. The emulator, with the pool file's Private Networks.
	poolData, err := os.ReadFile(o.PoolFile)
	if err != nil {
		return err
	}
	cfg, err := ipam.ParseConfig(poolData)
	if err != nil {
		return err
	}
	emu, emuURL, err := startEmulator(cfg)
	if err != nil {
		return err
	}
	defer emu.Close()

	// 2. kube-apiserver and etcd; webhook calls go through an egress proxy
	// to the in-process webhook, as they would to a pod.
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{Bin: bin, Dir: tmp})
	if err != nil {
		return err
	}
	defer func() {
		if serr := cp.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	kubeconfig, err := writeAdminKubeconfig(cp, tmp)
	if err != nil {
		return err
	}
	return runOn(ctx, o, playgroundRun{tmp: tmp, logPath: logPath, kubeconfig: kubeconfig, log: log, cfg: cfg, poolData: poolData, emuURL: emuURL, emu: emu, cp: cp})
}

// playgroundRun is what Run started before the chart: the emulator and
// the control plane, with an admin's kubeconfig at kubeconfig.
type playgroundRun struct {
	tmp, logPath, kubeconfig string
	log                      logr.Logger
	cfg                      *ipam.Config
	poolData                 []byte
	emuURL                   string
	emu                      *emulator.Server
	cp                       *testenv.ControlPlane
}

// startEmulator starts the Scaleway emulator with cfg's Private Networks
// and the bring-your-own example's IP booked.
func startEmulator(cfg *ipam.Config) (*emulator.Server, string, error) {
	emu := emulator.New(emulator.Options{Region: cfg.Region, SecretKey: SecretKey, LBDeleteDelay: emulator.ScalewayLBDeleteDelay})
	emuURL, err := emu.Start("127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	if err := seed(emu, cfg); err != nil {
		emu.Close()
		return nil, "", err
	}
	if _, err := emu.AddIPWithID(ExampleBYOID, cfg.Pools[0].PrivateNetworkID, exampleBYOAddress, []string{"reserved-by-terraform"}, nil); err != nil {
		emu.Close()
		return nil, "", fmt.Errorf("booking the bring-your-own example's IP: %w", err)
	}
	return emu, emuURL, nil
}

// writeAdminKubeconfig writes the kubeconfig of an admin of cp under tmp,
// for the user's kubectl, and returns its path.
func writeAdminKubeconfig(cp *testenv.ControlPlane, tmp string) (string, error) {
	data, err := cp.Kubeconfig("playground-admin", "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(tmp, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// runOn installs the chart, serves the webhook and runs the Scaleway CCM on
// what Run started, prints the banner and waits for ctx or the webhook.
func runOn(ctx context.Context, o Options, r playgroundRun) error {
	// 3. The chart, rendered with this pool file, minus what needs a kubelet.
	args, err := installChart(ctx, o.Root, r.tmp, r.poolData, r.cp.Kube)
	if err != nil {
		return err
	}

	// 4. The webhook and sweeper, with the chart's arguments, in process.
	pools := filepath.Join(r.tmp, "pools.yaml")
	if err := os.WriteFile(pools, r.poolData, 0o600); err != nil {
		return err
	}
	webhookPort, err := localrun.FreePort()
	if err != nil {
		return err
	}
	metricsPort, err := localrun.FreePort()
	if err != nil {
		return err
	}
	if err := os.Setenv("POD_NAMESPACE", Namespace); err != nil {
		return err
	}
	// Metrics in plain HTTP on the loopback, so the banner's URL opens with
	// curl or a browser; the chart serves them over HTTPS to authorized
	// callers only.
	args = append(args, "--config="+pools, "--cert-dir="+filepath.Join(r.tmp, "certs"),
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(webhookPort),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort), "--metrics-secure=false",
		"--health-probe-bind-address=0", "--sweep-interval=10s",
		"--shutdown-delay=0s") // nothing routes here but the playground: Ctrl-C stops at once
	opts, err := app.ParseFlags(args[1:]) // args[0] is "serve"
	if err != nil {
		return err
	}
	opts.RestConfig = r.cp.Config
	opts.Log = r.log
	opts.ScalewayOptions = []scw.ClientOption{scw.WithAPIURL(r.emuURL), scw.WithAuth(AccessKey, SecretKey), scw.WithDefaultProjectID(emulator.DefaultProjectID)}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- app.Serve(serveCtx, opts) }()
	defer func() {
		stopServe()
		<-served
	}()
	svc := &corev1.Service{}
	if err := r.cp.Kube.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: release}, svc); err != nil {
		return err
	}
	r.cp.Egress.Route(net.JoinHostPort(svc.Spec.ClusterIP, "443"), "127.0.0.1:"+strconv.Itoa(webhookPort))
	if err := waitListening(ctx, "127.0.0.1:"+strconv.Itoa(webhookPort), served); err != nil {
		return err
	}
	return runCCM(ctx, o, r, metricsPort, pools, served)
}

// installChart applies the chart rendered with poolData, minus what needs
// a kubelet, and the namespaces, and returns the webhook's arguments.
func installChart(ctx context.Context, root, tmp string, poolData []byte, kube client.Client) ([]string, error) {
	objs, args, err := renderChart(ctx, root, tmp, poolData)
	if err != nil {
		return nil, err
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace, Labels: map[string]string{request.LabelEnabled: "true"}}},
	} {
		if err := kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	for _, obj := range objs {
		if k := obj.GetKind(); k == "Deployment" || k == "PodDisruptionBudget" {
			continue
		}
		if err := kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("playground"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return args, nil
}

// runCCM runs the real Scaleway CCM (step 5), prints the banner, and waits
// for ctx or the webhook to end.
func runCCM(ctx context.Context, o Options, r playgroundRun, metricsPort int, pools string, served chan error) error {
	// 5. The Scaleway CCM, a process of its own with the identity and RBAC
	// of its shipped manifest: Load Balancers through the emulator's LB
	// API, backends on two registered Nodes.
	if err := ccmprocess.Grant(ctx, r.cp.Kube); err != nil {
		return err
	}
	if err := ccmprocess.BookAndRegisterNodes(ctx, r.cp.Kube, r.emu, r.cfg.ClusterPrivateNetworkID, 2); err != nil {
		return err
	}
	kubeconfig, err := r.cp.Kubeconfig(ccmprocess.User, ccmprocess.Groups...)
	if err != nil {
		return err
	}
	// One replica, --leader-elect=false: see ccmprocess.Options.LeaderElection.
	ccm, err := ccmprocess.Start(ccmprocess.Options{
		Binary: filepath.Join(o.Root, "bin", "scaleway-cloud-controller-manager"), Kubeconfig: kubeconfig, Dir: r.tmp, Name: "scaleway-ccm",
		APIURL: r.emuURL, AccessKey: AccessKey, SecretKey: SecretKey, ProjectID: emulator.DefaultProjectID,
		Zone: string(r.cfg.Region) + "-1", PrivateNetworkID: r.cfg.ClusterPrivateNetworkID, Prefix: "playground-",
	})
	if err != nil {
		return err
	}
	defer ccm.Stop()

	banner(o.Out, o.Root, r.kubeconfig, r.emuURL, metricsPort, pools, r.logPath, r.tmp, bannerCCM{
		name: fmt.Sprintf("the Scaleway cloud-controller-manager %s (bin/scaleway-cloud-controller-manager, pid %d)", ccmprocess.Version(o.Root), ccm.PID()),
		log:  ccm.LogPath,
	})
	select {
	case <-ctx.Done():
		fmt.Fprintln(o.Out, "\nstopping: the CCM, the webhook, kube-apiserver, etcd and the emulator; removing", r.tmp)
		return nil
	case err := <-served:
		served <- err // for the deferred wait
		return fmt.Errorf("the webhook stopped: %w", err)
	}
}
