package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/view"
)

// Credentials of the emulator.
const (
	AccessKey = emulator.TestAccessKey
	SecretKey = emulator.TestSecretKey
)

// Options configures Start.
type Options struct {
	// Root is the repository; default the parent of the test's package's parent.
	Root string
	// PrivateNetworks are created in the emulator, as "name=cidr[,cidr]";
	// "nodes" is the cluster's.
	PrivateNetworks []string
	// PoolFile is the pool file, {{name}} standing for the ID of Private
	// Network name (localrun.PoolFile).
	PoolFile string
	// Namespaces to create; true means opted in.
	Namespaces map[string]bool
	// HelmSets are --set values for rendering the chart's webhook
	// configuration and Service.
	HelmSets []string
	// Args are extra flags of serve (sweeper knobs, ...).
	Args []string
	// Replicas of the webhook behind the chart's Service; default 2, as the
	// chart installs.
	Replicas int
	// Logs receives the webhook's, sweeper's and CCM's logs; nil discards
	// them. With VerboseEnv set they go to stderr as well. The CCM's are
	// in a file too (CCMLogs).
	Logs io.Writer
	// APIServerFlags are extra kube-apiserver flags.
	APIServerFlags map[string]string
	// CCMReplicas is how many Scaleway CCM processes run; default 1, with
	// --leader-elect=false; more run leader election as shipped (see
	// ccm.go).
	CCMReplicas int
	// LBDeleteDelay is how long a deleted Load Balancer stays to_delete in
	// the emulator, holding its IPs, before it is gone (see
	// emulator.Options.LBDeleteDelay); default 3 s, so that every suite
	// sees Scaleway's asynchronous deletion (tens of seconds there). A
	// negative value deletes at once.
	LBDeleteDelay time.Duration
	// NoCCM leaves the CCM out (benchmarks of the admission path alone).
	NoCCM bool
	// RotatableKey gives the webhook an API key of its own (the install
	// guide's permission sets on the default Project; the CCM keeps the
	// owner's), read from a Secret volume: RotateKey replaces it.
	RotatableKey bool
	// Share runs this cluster on another Env's emulator, as two clusters
	// share one Scaleway Project: its Private Networks (PrivateNetworks is
	// ignored), and its owner closes it.
	Share *Env
}

// DefaultLBDeleteDelay is Options.LBDeleteDelay's default.
const DefaultLBDeleteDelay = 3 * time.Second

// The release the chart is rendered as: its webhook configuration, Service
// and TLS Secret names.
const (
	ReleaseNamespace = "scw-lb-ipam"
	release          = "scw-lb-ipam"
)

// Env is a running control plane with scw-lb-ipam replicas.
type Env struct {
	*ControlPlane
	Emu      *emulator.Server
	PNs      map[string]emulator.PrivateNetwork
	Replicas []*Replica
	Observer
	// CCM is the Scaleway CCM's processes (none with Options.NoCCM).
	CCM *CCM

	o       Options
	tmp     string
	service string // the webhook Service's ClusterIP:443
	keyDir  string // the webhook's Secret volume (Options.RotatableKey)
	keys    int    // the webhook keys made so far
}

// Start brings everything up: the emulator, kube-apiserver and etcd with an
// egress proxy in front of the cluster network, the chart's Service and
// MutatingWebhookConfiguration, and the replicas in self-managed TLS mode
// (they keep the CA Secret and the caBundle, as in a cluster). Call Stop,
// also when a test fails.
func Start(o Options) (_ *Env, err error) {
	// The defaults go into o before Env keeps its copy: the CCM and the
	// emulator are started from that copy.
	o = o.withDefaults()
	bin := filepath.Join(o.Root, "bin")
	if err := RequireTools(bin, "`make tools` (make test does it)"); err != nil {
		return nil, err
	}
	e := &Env{o: o, PNs: map[string]emulator.PrivateNetwork{}}
	e.CCM = &CCM{env: e}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	if e.tmp, err = os.MkdirTemp("", "scw-lb-ipam-testenv-"); err != nil {
		return nil, err
	}
	if o.Share != nil {
		e.Emu, e.PNs = o.Share.Emu, o.Share.PNs
	} else if e.Emu, e.PNs, err = startEmulator(o); err != nil {
		return nil, err
	}
	// The apiserver calls the webhook through its Service: the egress
	// proxy maps the ClusterIP to the replicas.
	if e.ControlPlane, err = StartControlPlane(ControlPlaneOptions{Bin: bin, Dir: e.tmp, APIServerFlags: o.APIServerFlags, Verbose: Verbose()}); err != nil {
		return nil, err
	}
	if err := e.installChart(context.Background()); err != nil {
		return nil, err
	}
	if o.RotatableKey {
		if err := e.setupKey(); err != nil {
			return nil, err
		}
	}
	if err := e.addReplicas(); err != nil {
		return nil, err
	}
	e.Observer = Observer{emu: e.Emu, replicas: e.Replicas}
	if err := e.StartWebhook(); err != nil {
		return nil, err
	}
	if !o.NoCCM {
		if err := e.CCM.start(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// withDefaults is o with its zero values replaced by the defaults.
func (o Options) withDefaults() Options {
	if o.Root == "" {
		o.Root, _ = filepath.Abs("../..")
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.CCMReplicas == 0 {
		o.CCMReplicas = 1
	}
	switch {
	case o.LBDeleteDelay == 0:
		o.LBDeleteDelay = DefaultLBDeleteDelay
	case o.LBDeleteDelay < 0:
		o.LBDeleteDelay = 0
	}
	return o
}

// startEmulator starts the Scaleway emulator with o's Private Networks.
func startEmulator(o Options) (*emulator.Server, map[string]emulator.PrivateNetwork, error) {
	emu := emulator.New(emulator.Options{SecretKey: SecretKey, LBDeleteDelay: o.LBDeleteDelay})
	if _, err := emu.Start("127.0.0.1:0"); err != nil {
		return nil, nil, err
	}
	pns, err := emu.AddPrivateNetworks(o.PrivateNetworks...)
	if err != nil {
		_ = emu.Close()
		return nil, nil, err
	}
	return emu, pns, nil
}

// addReplicas configures Options.Replicas replicas on the pool file, each
// reaching the apiserver through a proxy of its own; StartWebhook starts
// them.
func (e *Env) addReplicas() error {
	pools := filepath.Join(e.tmp, "pools.yaml")
	if err := os.WriteFile(pools, []byte(localrun.PoolFile(e.o.PoolFile, e.PNs)), 0o600); err != nil {
		return err
	}
	apiURL, err := url.Parse(e.Config.Host)
	if err != nil {
		return err
	}
	for i := range e.o.Replicas {
		r := &Replica{Name: fmt.Sprintf("replica-%d", i), env: e}
		if err := r.configure(pools, apiURL.Host); err != nil {
			return err
		}
		e.Replicas = append(e.Replicas, r)
	}
	return nil
}

// installChart creates the release's namespace and Options.Namespaces,
// then renders the chart's webhook configuration and Service (for a release
// named scw-lb-ipam in namespace scw-lb-ipam) and applies them.
func (e *Env) installChart(ctx context.Context) error {
	if err := createNamespaces(ctx, e.Kube, e.o.Namespaces); err != nil {
		return err
	}
	chart := filepath.Join(e.o.Root, "charts", "scw-lb-ipam")
	args := []string{"template", release, chart, "--namespace", ReleaseNamespace,
		"--values", filepath.Join(chart, "ci", "self-managed-values.yaml"),
		"--show-only", "templates/mutatingwebhookconfiguration.yaml", "--show-only", "templates/service.yaml",
		// The view's kinds, which the sweeper's leader writes.
		"--show-only", "templates/crds.yaml"}
	for _, s := range e.o.HelmSets {
		args = append(args, "--set", s)
	}
	out, err := HelmCommand(ctx, filepath.Join(e.o.Root, "bin", "helm"), filepath.Join(e.tmp, "helm"), args...).Output()
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := e.Kube.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	svc := &corev1.Service{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: ReleaseNamespace, Name: release}, svc); err != nil {
		return err
	}
	e.service = net.JoinHostPort(svc.Spec.ClusterIP, "443")
	return e.viewServed(ctx)
}

// viewServed waits until the apiserver serves the view's kinds, as the
// chart's install does before the pods start.
func (e *Env) viewServed(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, k := range []schema.GroupVersionKind{view.PoolKind, view.ReservationKind} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(k.GroupVersion().WithKind(k.Kind + "List"))
			if err := e.Kube.List(ctx, list); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// createNamespaces creates the release's namespace, and namespaces, those
// true opted in.
func createNamespaces(ctx context.Context, kube client.Client, namespaces map[string]bool) error {
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReleaseNamespace}}); err != nil {
		return err
	}
	for name, optedIn := range namespaces {
		if name == ReleaseNamespace {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if optedIn {
			ns.Labels = map[string]string{request.LabelEnabled: "true"}
		}
		if err := kube.Create(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// logs is where the webhook's, sweeper's and CCM's logs go.
func (e *Env) logs() io.Writer {
	w := e.o.Logs
	if w == nil {
		w = io.Discard
	}
	if Verbose() {
		w = io.MultiWriter(w, os.Stderr)
	}
	return w
}

// VerboseEnv is the suites' one switch for their logs (see the package
// documentation): read here only, so that every suite means the same by it.
const VerboseEnv = "SCW_LB_IPAM_TEST_VERBOSE"

// Verbose reports whether VerboseEnv is set to a true value (1, true):
// the suites then copy to stderr the logs they otherwise discard or keep
// for a failure message.
func Verbose() bool {
	v, _ := strconv.ParseBool(os.Getenv(VerboseEnv))
	return v
}

// Stop stops everything: the replicas, then kube-apiserver and etcd
// (SIGTERM, then SIGKILL after the timeout), the proxies, the emulator, and
// removes temp files.
func (e *Env) Stop() {
	e.CCM.stop()
	e.CCM.Gate.close()
	e.StopWebhook()
	if err := e.ControlPlane.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping the control plane:", err)
	}
	for _, r := range e.Replicas {
		r.proxy.close()
	}
	if e.Emu != nil && e.o.Share == nil {
		_ = e.Emu.Close()
	}
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
}

// ScalewayOptions point a Scaleway client at the emulator, as the webhook's.
func (e *Env) ScalewayOptions() []scw.ClientOption {
	return e.Emu.ClientOptions()
}

// PoolFile is the pool file the webhook runs with.
func (e *Env) PoolFile() string { return localrun.PoolFile(e.o.PoolFile, e.PNs) }
