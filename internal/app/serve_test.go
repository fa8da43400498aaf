package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

func TestServeFlagsDefaults(t *testing.T) {
	o, err := ParseFlags([]string{"--tls-mode=cert-manager"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.MetricsSecure || o.EnableHTTP2 || o.MetricsAddr != ":8443" {
		t.Fatalf("defaults: metrics secure %v on %q, HTTP/2 %v; want secure on :8443, no HTTP/2", o.MetricsSecure, o.MetricsAddr, o.EnableHTTP2)
	}
	o, err = ParseFlags([]string{"--tls-mode=cert-manager", "--metrics-secure=false", "--enable-http2", "--metrics-bind-address=:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsSecure || !o.EnableHTTP2 || o.MetricsAddr != ":8080" {
		t.Fatalf("set: metrics secure %v on %q, HTTP/2 %v", o.MetricsSecure, o.MetricsAddr, o.EnableHTTP2)
	}
	if m := o.metricsServerOptions(); m.SecureServing || m.FilterProvider != nil {
		t.Fatal("--metrics-secure=false still serves HTTPS or filters")
	}
}

// TestHTTP2OffByDefault starts the webhook and metrics servers from the
// options serve builds, and connects with a client that prefers HTTP/2
// (ALPN h2, then http/1.1): they answer HTTP/1.1 unless --enable-http2.
func TestHTTP2OffByDefault(t *testing.T) {
	certDir := selfSignedCertDir(t)
	for _, tt := range []struct {
		enable bool
		want   string // the negotiated protocol and the response's
	}{
		{false, "http/1.1 HTTP/1.1"},
		{true, "h2 HTTP/2.0"},
	} {
		t.Run(fmt.Sprintf("enable-http2=%v", tt.enable), func(t *testing.T) {
			args := []string{"--tls-mode=cert-manager", "--cert-dir=" + certDir, "--webhook-host=127.0.0.1",
				fmt.Sprintf("--webhook-port=%d", fixtures.Port(t)), fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", fixtures.Port(t))}
			if tt.enable {
				args = append(args, "--enable-http2")
			}
			o, err := ParseFlags(args)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			hook := crwebhook.NewServer(o.webhookServerOptions())
			hook.Register(WebhookPath, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			go func() { _ = hook.Start(ctx) }()
			// The metrics filter asks the apiserver only about requests that
			// carry a token; this one carries none and is refused locally.
			restCfg := &rest.Config{Host: "https://127.0.0.1:1"}
			hc, err := rest.HTTPClientFor(restCfg)
			if err != nil {
				t.Fatal(err)
			}
			metrics, err := metricsserver.NewServer(o.metricsServerOptions(), restCfg, hc)
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = metrics.Start(ctx) }()

			for server, url := range map[string]string{
				"webhook": fmt.Sprintf("https://127.0.0.1:%d%s", o.Server.Port, WebhookPath),
				"metrics": "https://" + o.MetricsAddr + "/metrics",
			} {
				resp := getH2(t, url)
				got := resp.TLS.NegotiatedProtocol + " " + resp.Proto
				if got != tt.want {
					t.Errorf("%s server: negotiated %q, want %q", server, got, tt.want)
				}
				if server == "metrics" && resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("metrics without a token: %s, want 401", resp.Status)
				}
			}
		})
	}
}

// selfSignedCertDir holds a serving pair for 127.0.0.1, as the webhook
// server reads it from --cert-dir.
func selfSignedCertDir(t *testing.T) string {
	t.Helper()
	certDir := t.TempDir()
	cert, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certDir
}

// getH2 GETs url with a client that offers h2 first, retrying while the
// server starts.
func getH2(t *testing.T, url string) *http.Response {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}, //nolint:gosec // a self-signed test server
	}}
	defer c.CloseIdleConnections()
	var (
		resp *http.Response
		err  error
	)
	if !localrun.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		resp, err = c.Get(url)
		return err == nil
	}) {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp
}
