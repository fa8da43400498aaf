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
// between two calls (see scaleway.Key), once the API accepts it, and
// probes a key the API refused until it is accepted. It polls for the
// reason configReloader does.
type keyReloader struct {
	dir   string
	every time.Duration
	key   *scaleway.Key
	cloud scaleway.Cloud
	// candidate is a Cloud signing with k, to probe a new key before it
	// is put in use.
	candidate func(ctx context.Context, k *scaleway.Key) (scaleway.Cloud, error)
	config    func() *ipam.Config
	clock     clock.WithTicker
	log       logr.Logger
	probeAt   time.Time
	// bad is the mounted pair last found malformed or refused, reported
	// once and probed again at probeAt.
	bad string
}

// NeedLeaderElection is false: every replica calls Scaleway.
func (r *keyReloader) NeedLeaderElection() bool { return false }

// Start polls until ctx ends.
func (r *keyReloader) Start(ctx context.Context) error {
	return poll(ctx, r.clock, r.every, r.check)
}

// check tries a changed pair, or probes a refused key in use once
// keyProbeEvery passed.
func (r *keyReloader) check(ctx context.Context) {
	if r.dir != "" && r.tryMounted(ctx) {
		return
	}
	if r.key.Err() != nil && !r.clock.Now().Before(r.probeAt) {
		r.probeAt = r.clock.Now().Add(keyProbeEvery)
		probeKey(ctx, r.cloud, r.config())
		r.report()
	}
}

// tryMounted puts the mounted pair in use when it differs from the key in
// use and the API accepts it, or when the key in use is refused too (a
// new key refused for a set is better than an old one the API no longer
// knows). A malformed pair, or a refused one while the key in use is
// accepted, changes nothing and is reported once. It reports whether it
// probed.
func (r *keyReloader) tryMounted(ctx context.Context) bool {
	access, secret, err := readKey(r.dir)
	pair := access + "\x00" + secret
	var cand *scaleway.Key
	if err == nil {
		cand, err = scaleway.NewKey(access, secret)
	}
	switch {
	case err != nil:
		if r.bad != err.Error() {
			r.bad = err.Error()
			r.log.Error(err, "the mounted API key is malformed; keeping the key in use", "dir", r.dir)
		}
		return false
	case access == r.key.AccessKey() && !r.key.Differs(secret):
		r.bad = ""
		return false
	case pair == r.bad && r.key.Err() == nil && r.clock.Now().Before(r.probeAt):
		return false // refused a moment ago, and the key in use serves
	}
	r.probeAt = r.clock.Now().Add(keyProbeEvery)
	if c, cerr := r.candidate(ctx, cand); cerr != nil {
		err = cerr
	} else {
		probeKey(ctx, c, r.config())
		err = cand.Err()
	}
	if err != nil {
		// Kept out only for a key in use the API accepts now: one revoked
		// meanwhile shows only at a call, which this replica may not
		// have made.
		probeKey(ctx, r.cloud, r.config())
	}
	if err != nil && r.key.Err() == nil {
		if r.bad != pair {
			r.log.Error(err, "the new API key in the Secret is refused; keeping the key in use, which the API accepts", "refusedAccessKey", access, "keyInUse", r.key.AccessKey())
		}
		r.bad = pair
		return true
	}
	before := r.key.AccessKey()
	_, _ = r.key.Set(access, secret) // well formed: NewKey took it
	r.bad = ""
	r.log.Info("Scaleway API key changed: the calls from now on are signed with it", "accessKey", access, "previousAccessKey", before)
	probeKey(ctx, r.cloud, r.config())
	r.report()
	return true
}

// report logs what the API said of the key in use at the last probe.
func (r *keyReloader) report() {
	if err := r.key.Err(); err != nil {
		r.log.Error(err, "the Scaleway API refuses the API key", "accessKey", r.key.AccessKey())
		return
	}
	r.log.Info("the Scaleway API accepts the API key", "accessKey", r.key.AccessKey())
}

// probeKey makes the reads each permission set allows, so that a key's
// refusals (or their end) show now: a list of the Project's IPs that
// matches none, and a read of each pool's Private Network. No write: a
// booking's refusal shows at the next booking.
func probeKey(ctx context.Context, cloud scaleway.Cloud, cfg *ipam.Config) {
	ctx, cancel := context.WithTimeout(ctx, keyProbeTimeout)
	defer cancel()
	_, _ = cloud.ListIPs(ctx, scaleway.ListFilter{ProjectID: cloud.ProjectID(), Tags: []string{probeTag}})
	var seen []string
	for _, p := range cfg.Pools {
		if !slices.Contains(seen, p.PrivateNetworkID) {
			seen = append(seen, p.PrivateNetworkID)
			_, _ = cloud.GetPrivateNetwork(ctx, p.PrivateNetworkID)
		}
	}
}

// keyProbeTimeout bounds a probe while the API does not answer.
const keyProbeTimeout = 30 * time.Second

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
	// scaleway-key-has-<set> for each permission set (403). They fail only
	// in a process that never saw the call accepted (Key.Unready).
	for _, set := range append([]string{""}, scaleway.PermissionSets...) {
		name := "scaleway-key-accepted"
		if set != "" {
			name = "scaleway-key-has-" + set
		}
		if err := mgr.AddReadyzCheck(name, func(*http.Request) error { return r.key.Unready(set) }); err != nil {
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
