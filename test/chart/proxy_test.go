package chart

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// connectProxy is an HTTP CONNECT proxy on a local socket that the apiserver's
// egress selector uses for "cluster" traffic. It maps host:port pairs (the
// webhook Service's DNS name) to local addresses and refuses the rest.
type connectProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	routes map[string]string
	wg     sync.WaitGroup
}

// startConnectProxy listens on a Unix socket: the apiserver speaks
// HTTP CONNECT over TCP only with TLS, over a socket without.
func startConnectProxy(socket string) (*connectProxy, error) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	p := &connectProxy{ln: ln, routes: map[string]string{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *connectProxy) egressSelectorConfig() string {
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

// route sends CONNECTs for hostport to target; "" removes the route.
func (p *connectProxy) route(hostport, target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if target == "" {
		delete(p.routes, hostport)
		return
	}
	p.routes[hostport] = target
}

func (p *connectProxy) Close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *connectProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(conn)
	}
}

func (p *connectProxy) handle(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	p.mu.Lock()
	target, ok := p.routes[req.Host]
	p.mu.Unlock()
	if !ok {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}
