package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
	"github.com/scw-lb-ipam/scw-lb-ipam/webhook"
)

// TestDrainClosesKeepAliveConnections drives a rollout's stop against
// clients that pool their connections, as the apiserver does: one admits,
// the replica starts draining, the same client admits again during the
// delay, and the replica stops listening. The admission served while
// draining must tell the client to close its connection (HTTP/1.1:
// Connection: close; HTTP/2, --enable-http2: a GOAWAY), so that no pooled
// connection to the replica is left for a later admission to be written on
// once it stopped (a "broken pipe" instead of a dial to another replica).
// A client whose pooled connection carried nothing during the delay loses
// it when the replica stops: its next admission dials too.
func TestDrainClosesKeepAliveConnections(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		// In parallel: each waits out the drain delay in real time.
		t.Run(fmt.Sprintf("enable-http2=%v", h2), func(t *testing.T) { t.Parallel(); testDrainClosesKeepAliveConnections(t, h2) })
	}
}

func testDrainClosesKeepAliveConnections(t *testing.T, h2 bool) {
	const delay = 4 * time.Second
	o, err := ParseFlags([]string{"--tls-mode=cert-manager", "--cert-dir=" + selfSignedCertDir(t), fmt.Sprintf("--enable-http2=%v", h2),
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", fixtures.Port(t))})
	if err != nil {
		t.Fatal(err)
	}
	mgr := &drainManager{server: crwebhook.NewServer(o.webhookServerOptions()), ready: map[string]healthz.Checker{}}
	allow := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	mgrCtx, stop := startDraining(t, ctx, mgr, o.Webhook, allow, delay)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.server.Start(mgrCtx) }()
	url := fmt.Sprintf("https://127.0.0.1:%d%s", o.Server.Port, WebhookPath)

	busy, idle := newPoolingClient(h2), newPoolingClient(h2)
	fixtures.Eventually(t, 10*time.Second, 50*time.Millisecond, "the webhook server to serve", func() bool {
		_, err := idle.admit(url)
		return err == nil
	})
	proto := "HTTP/1.1"
	if h2 {
		proto = "HTTP/2.0"
	}
	if resp, err := busy.admit(url); err != nil || resp.Close || resp.Proto != proto {
		t.Fatalf("admission before the drain: %v %+v; want kept alive, over %s", err, resp, proto)
	}
	if busy.open() != 1 || idle.open() != 1 {
		t.Fatalf("pooled connections before the drain: %d and %d, want 1 each", busy.open(), idle.open())
	}

	sigterm()
	fixtures.Eventually(t, 2*time.Second, 10*time.Millisecond, "/readyz to fail", func() bool {
		return mgr.ready["not-stopping"](nil) != nil
	})
	resp, err := busy.admit(url)
	if err != nil {
		t.Fatalf("admission while draining: %v", err)
	}
	if !h2 && !resp.Close {
		t.Errorf("admission while draining answered with Connection %q: the client keeps its connection pooled to a replica about to stop", resp.Header.Get("Connection"))
	}
	if !localrun.Poll(2*time.Second, 10*time.Millisecond, func() bool { return busy.open() == 0 }) {
		t.Errorf("the client still pools %d connection(s) to the draining replica", busy.open())
	}
	select {
	case err := <-stopped:
		t.Fatalf("the webhook server stopped (%v) before the delay: the checks above prove nothing", err)
	default:
	}

	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, 2*time.Second, 10*time.Millisecond, "the idle client to drop its connection to the stopped replica", func() bool {
		return idle.open() == 0
	})
	for name, c := range map[string]*poolingClient{"the client that admitted while draining": busy, "the idle client": idle} {
		_, err := c.admit(url)
		var op *net.OpError
		if c.reused || !errors.As(err, &op) || op.Op != "dial" {
			t.Errorf("%s, after the stop: reused a pooled connection %v, error %v; want a new dial, refused", name, c.reused, err)
		}
	}
}

// startDraining serves h on the manager's webhook server as Start does,
// and returns the context drainOnStop gives the manager.
func startDraining(t *testing.T, ctx context.Context, mgr manager.Manager, o webhook.Options, h admission.Handler, delay time.Duration) (context.Context, context.CancelFunc) {
	t.Helper()
	var draining atomic.Bool
	webhook.Register(mgr, o, h, draining.Load)
	mgrCtx, stop, err := drainOnStop(ctx, mgr, delay, &draining, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return mgrCtx, stop
}

// drainManager is the part of a manager that Start's drain and webhook
// registration use: its webhook server and readiness checks.
type drainManager struct {
	manager.Manager // nil: anything else called panics
	server          crwebhook.Server
	ready           map[string]healthz.Checker
}

func (m *drainManager) GetWebhookServer() crwebhook.Server { return m.server }

func (m *drainManager) AddReadyzCheck(name string, c healthz.Checker) error {
	m.ready[name] = c
	return nil
}

// poolingClient keeps its connections alive between admissions, as the
// apiserver's webhook client does, and counts those it holds open.
type poolingClient struct {
	http.Client
	mu     sync.Mutex
	conns  []*countedConn
	reused bool // whether the last admission went on a pooled connection
}

func newPoolingClient(h2 bool) *poolingClient {
	c := &poolingClient{}
	dialer := &net.Dialer{Timeout: time.Second}
	c.Transport = &http.Transport{
		ForceAttemptHTTP2: h2,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed test server
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cc := &countedConn{Conn: conn}
			c.mu.Lock()
			c.conns = append(c.conns, cc)
			c.mu.Unlock()
			return cc, nil
		},
	}
	c.Timeout = 5 * time.Second
	return c
}

// admit posts an AdmissionReview and reads the whole answer, which lets the
// transport pool the connection again.
func (c *poolingClient) admit(url string) (*http.Response, error) {
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &admissionv1.AdmissionRequest{UID: "d1c8a9e2-0000-4000-8000-000000000002"},
	})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	c.reused = false
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { c.reused = info.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return resp, nil
}

// open counts the connections the client has not closed.
func (c *poolingClient) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, cc := range c.conns {
		if !cc.isClosed() {
			n++
		}
	}
	return n
}

type countedConn struct {
	net.Conn
	mu     sync.Mutex
	closed bool
}

func (c *countedConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *countedConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
