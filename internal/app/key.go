package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// The files of the credentials Secret mounted as a volume: the Secret's
// keys, which are the SDK's environment variables.
const (
	accessKeyFile = "SCW_ACCESS_KEY"
	secretKeyFile = "SCW_SECRET_KEY"
)

// readKey reads the pair from dir; the error names the file, never its
// content.
func readKey(dir string) (access, secret string, err error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("reading the API key: %w (the credentials Secret must hold %s and %s)", err, accessKeyFile, secretKeyFile)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if access, err = read(accessKeyFile); err != nil {
		return "", "", err
	}
	if secret, err = read(secretKeyFile); err != nil {
		return "", "", err
	}
	return access, secret, nil
}

// DefaultKeyDir is where the chart mounts the API key: every command
// (serve, and status or handover run in its pod) reads it there first,
// since the pod's environment keeps the key it started with.
const DefaultKeyDir = "/var/run/scw-lb-ipam/scaleway"

// keyDirUsage is the help of every command's --scaleway-key-dir.
const keyDirUsage = "directory of the files SCW_ACCESS_KEY and SCW_SECRET_KEY (the credentials Secret as a volume), read before the SDK environment; serve uses a new key there without a restart. Empty, or the default when absent: the SDK environment's key"

// newKey is the key every Scaleway call is signed with: the pair in dir,
// or, without one (dir empty, or the default and absent), a key that only
// reports what the API says of the SDK environment's.
func newKey(dir string) (*scaleway.Key, error) {
	if _, err := os.Stat(dir); dir == "" || (dir == DefaultKeyDir && os.IsNotExist(err)) {
		return &scaleway.Key{}, nil
	}
	access, secret, err := readKey(dir)
	if err != nil {
		return nil, err
	}
	k, err := scaleway.NewKey(access, secret)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", secretKeyFile, dir, err)
	}
	return k, nil
}

// keyProbeEvery paces the probe of a refused key: a permission granted in
// IAM changes no file, and only a call tells.
const keyProbeEvery = time.Minute

// keyReloader puts a new API key in use when the mounted Secret changes,
// between two calls (see scaleway.Key), and probes a key the API refused
// until it is accepted. It polls for the reason configReloader does.
type keyReloader struct {
	dir     string
	every   time.Duration
	key     *scaleway.Key
	cloud   scaleway.Cloud
	config  func() *ipam.Config
	clock   clock.WithTicker
	log     logr.Logger
	probeAt time.Time
	refused string // the malformed pair's error last logged, logged once
}

// NeedLeaderElection is false: every replica calls Scaleway.
func (r *keyReloader) NeedLeaderElection() bool { return false }

// Start polls until ctx ends.
func (r *keyReloader) Start(ctx context.Context) error {
	return poll(ctx, r.clock, r.every, r.check)
}

// check puts a changed pair in use and probes it, or probes a refused key
// again once keyProbeEvery passed. A malformed pair changes nothing.
func (r *keyReloader) check(ctx context.Context) {
	if r.dir != "" {
		before := r.key.AccessKey()
		access, secret, err := readKey(r.dir)
		changed := false
		if err == nil {
			changed, err = r.key.Set(access, secret)
		}
		switch {
		case err != nil && err.Error() != r.refused:
			r.refused = err.Error()
			r.log.Error(err, "the mounted API key is malformed; keeping the key in use", "dir", r.dir)
		case changed:
			r.refused = ""
			r.log.Info("Scaleway API key changed: the calls from now on are signed with it", "accessKey", access, "previousAccessKey", before)
			r.probe(ctx)
			return
		}
	}
	if r.key.Err() != nil && !r.clock.Now().Before(r.probeAt) {
		r.probe(ctx)
	}
}

// probe makes the calls that need each permission set, so that the key's
// refusals (or their end) show now: a list of the Project's IPs that
// matches none, and a read of each pool's Private Network.
func (r *keyReloader) probe(ctx context.Context) {
	r.probeAt = r.clock.Now().Add(keyProbeEvery)
	_, _ = r.cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: r.cloud.ProjectID(), Tags: []string{keyProbeTag}})
	var seen []string
	for _, p := range r.config().Pools {
		if !slices.Contains(seen, p.PrivateNetworkID) {
			seen = append(seen, p.PrivateNetworkID)
			_, _ = r.cloud.GetPrivateNetwork(ctx, p.PrivateNetworkID)
		}
	}
	if err := r.key.Err(); err != nil {
		r.log.Error(err, "the Scaleway API refuses the API key")
		return
	}
	r.log.Info("the Scaleway API accepts the API key", "accessKey", r.key.AccessKey())
}

// keyProbeTag is a tag no IP carries: the probe's list is one empty page.
const keyProbeTag = "scw-lb-ipam-key-probe"

// setupKeyWithManager watches dir (when set) for a new key, and reports
// the key's refusals as a metric and readiness checks.
func setupKeyWithManager(mgr manager.Manager, r *keyReloader, reg prometheus.Registerer) error {
	if err := reg.Register(newKeyCollector(r.key)); err != nil {
		return err
	}
	if err := mgr.Add(r); err != nil {
		return err
	}
	// One check per refusal, since /readyz?verbose withholds the reasons
	// and shows the names: scaleway-key-accepted (401), then
	// scaleway-key-has-<set> for each permission set (403).
	for _, set := range append([]string{""}, scaleway.PermissionSets...) {
		name := "scaleway-key-accepted"
		if set != "" {
			name = "scaleway-key-has-" + set
		}
		if err := mgr.AddReadyzCheck(name, func(*http.Request) error { return r.key.Refused(set) }); err != nil {
			return err
		}
	}
	return nil
}

// keyCollector exports, at scrape time:
// scw_lb_ipam_scaleway_key_refused{reason,permission_set}, 1 while the key
// in use is refused (reason denied_authentication with no set, or
// permissions_denied with the set it lacks), and
// scw_lb_ipam_scaleway_key_info{access_key} 1, which tells an operator that
// every replica signs with the new key before the old one is revoked.
type keyCollector struct {
	key           *scaleway.Key
	refused, info *prometheus.Desc
}

func newKeyCollector(key *scaleway.Key) *keyCollector {
	return &keyCollector{key: key,
		refused: prometheus.NewDesc("scw_lb_ipam_scaleway_key_refused",
			"1 while the Scaleway API refuses the API key in use: reason denied_authentication (unknown, revoked or expired key) or permissions_denied (permission_set is what its IAM application lacks).",
			[]string{"reason", "permission_set"}, nil),
		info: prometheus.NewDesc("scw_lb_ipam_scaleway_key_info",
			"1, labelled with the access key of the API key this replica signs its calls with.", []string{"access_key"}, nil)}
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.refused; ch <- c.info }

// Collect exports every refusal a key can meet, 0 or 1, so that the
// alert's series exist before it fires.
func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	refused := c.key.Refusals()
	for _, set := range append([]string{""}, scaleway.PermissionSets...) {
		r := scaleway.Refusal{PermissionSet: set, Status: http.StatusForbidden}
		if set == "" {
			r.Status = http.StatusUnauthorized
		}
		v := 0.0
		if slices.ContainsFunc(refused, func(x scaleway.Refusal) bool { return x.PermissionSet == set }) {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, v, r.Reason(), set)
	}
	if ak := c.key.AccessKey(); ak != "" {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, ak)
	}
}
