package playground

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

func waitListening(ctx context.Context, addr string, served chan error) error {
	var stopped error // why the wait ended before the webhook listened
	listening := localrun.Poll(60*time.Second, 100*time.Millisecond, func() bool {
		select {
		case err := <-served:
			served <- err
			stopped = fmt.Errorf("the webhook stopped while starting: %w", err)
			return true
		case <-ctx.Done():
			stopped = ctx.Err()
			return true
		default:
		}
		// A TLS handshake, not a bare connect: the server logs half-open
		// connections as errors.
		d := &net.Dialer{Timeout: time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a liveness probe only
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	switch {
	case stopped != nil:
		return stopped
	case !listening:
		return fmt.Errorf("the webhook did not listen on %s within 60s", addr)
	}
	return nil
}

// ReadyLine is printed once everything answers; scripts wait for it.
const ReadyLine = "playground ready"

// bannerCCM is what the banner says of the CCM: which one runs, its log.
type bannerCCM struct{ name, log string }

func banner(w io.Writer, root, kubeconfig, emuURL string, metricsPort int, pools, logPath, tmp string, ccm bannerCCM) {
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	fmt.Fprintf(w, `
%s: a real kube-apiserver and etcd, the Scaleway emulator, and scw-lb-ipam
(webhook + sweeper, self-managed TLS) installed from charts/scw-lb-ipam, next to
the real Scaleway cloud-controller-manager (a process of its own, CCM below)
that makes the Load Balancers.

  KUBECONFIG   %s
  emulator     %s   (Scaleway API; access key %s)
  metrics      http://127.0.0.1:%d/metrics
  pool file    %s
  logs         %s
  CCM          %s
  CCM log      %s
  namespace    %s is opted in (label %s=true)

Try it (from the repository):

  export KUBECONFIG=%s
  kubectl apply -f examples/service.yaml
  kubectl -n %s get service api -o jsonpath='{.metadata.annotations}{"\n"}'
  SCW_API_URL=%s SCW_ACCESS_KEY=%s SCW_SECRET_KEY=%s SCW_DEFAULT_PROJECT_ID=%s bin/scw-lb-ipam status --config %s

Ctrl-C stops everything and removes %s.
`, ReadyLine, kubeconfig, emuURL, AccessKey, metricsPort, rel(pools), logPath, ccm.name, ccm.log, DemoNamespace, request.LabelEnabled,
		kubeconfig, DemoNamespace, emuURL, AccessKey, SecretKey, emulator.DefaultProjectID, pools, tmp)
}
