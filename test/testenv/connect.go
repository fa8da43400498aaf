package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// ConnectProxy is an HTTP CONNECT proxy on a local socket that the apiserver's
// egress selector uses for "cluster" traffic. It maps host:port pairs (the
// webhook Service's ClusterIP) to local addresses and refuses the rest; a
// Service with several endpoints (replicas) is reached round-robin, and an
// endpoint that refuses the connection is skipped, as kube-proxy stops
// routing to a pod that is gone.
type ConnectProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	routes map[string][]string
	next   map[string]int
	// tunnels are the open connections by target: the apiserver keeps
	// its connections to a webhook alive, so a route change closes those
	// to targets it drops, as a pod that lost its endpoint stops being
	// reachable.
	tunnels map[net.Conn]string
	wg      sync.WaitGroup
}

// StartConnectProxy listens on a Unix socket: the apiserver speaks
// HTTP CONNECT over TCP only with TLS, over a socket without.
func StartConnectProxy(socket string) (*ConnectProxy, error) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	p := &ConnectProxy{ln: ln, routes: map[string][]string{}, next: map[string]int{}, tunnels: map[net.Conn]string{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// EgressSelectorConfig is the apiserver's --egress-selector-config-file
// content that sends "cluster" traffic through the proxy.
func (p *ConnectProxy) EgressSelectorConfig() string {
	return fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: %s
`, p.ln.Addr())
}

// Route sends CONNECTs for hostport to the targets, round-robin; none
// removes the route. Open tunnels to targets hostport no longer routes to
// are closed.
func (p *ConnectProxy) Route(hostport string, targets ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var live []string
	for _, t := range targets {
		if t != "" {
			live = append(live, t)
		}
	}
	for _, old := range p.routes[hostport] {
		if slices.Contains(live, old) {
			continue
		}
		for conn, target := range p.tunnels {
			if target == old {
				_ = conn.Close()
				delete(p.tunnels, conn)
			}
		}
	}
	if len(live) == 0 {
		delete(p.routes, hostport)
		return
	}
	p.routes[hostport] = live
}

// dial connects conn's tunnel to the next target of hostport that answers
// and registers it, under the lock Route takes: a tunnel is never opened to
// a target a concurrent Route just removed (it would outlive the route).
// Loopback dials are quick enough to hold the lock.
func (p *ConnectProxy) dial(hostport string, conn net.Conn) net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	targets := p.routes[hostport]
	start := p.next[hostport]
	p.next[hostport]++
	for i := range targets {
		target := targets[(start+i)%len(targets)]
		if up, err := net.DialTimeout("tcp", target, time.Second); err == nil {
			p.tunnels[conn] = target
			return up
		}
	}
	return nil
}

// Close stops accepting and waits for the accept loop.
func (p *ConnectProxy) Close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *ConnectProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(conn)
	}
}

func (p *ConnectProxy) handle(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	up := p.dial(req.Host, conn)
	if up == nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	defer func() {
		p.mu.Lock()
		delete(p.tunnels, conn)
		p.mu.Unlock()
	}()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}
