package testenv

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Gate stands between the CCM and the apiserver: it serves the API over
// plain HTTP on loopback and forwards each request as the CCM's user, once
// the function a test set with Before has returned without answering it.
// A test acts there, holds the request or answers it, to drive an order the
// CCM meets only under load: a write the CCM computed from a copy read
// before a delete and re-create of its name, say.
type Gate struct {
	srv       *http.Server
	ln        net.Listener
	transport http.RoundTripper

	mu     sync.Mutex
	before func(http.ResponseWriter, *http.Request) (answered bool)
}

// newGate serves cfg's apiserver as cfg's user.
func newGate(cfg *rest.Config) (*Gate, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &Gate{ln: ln, transport: transport}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
		},
		Transport: transport,
		// Watches stream: each event goes on as it comes.
		FlushInterval: -1,
		// A client that went away (a CCM stopped mid-watch) is no error.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
			}
		},
	}
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		before := g.before
		g.mu.Unlock()
		if before != nil && before(w, r) {
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// Before sets f, called with each request before it is forwarded (and
// concurrently, as requests come): the request is not forwarded when f
// answered it. nil forwards every request as it comes.
func (g *Gate) Before(f func(w http.ResponseWriter, r *http.Request) (answered bool)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.before = f
}

// kubeconfig is the kubeconfig of a client of the gate: no credentials of
// its own, the gate forwards as its user.
func (g *Gate) kubeconfig() ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"gate": {Server: "http://" + g.ln.Addr().String()}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"gate": {}},
		Contexts:       map[string]*clientcmdapi.Context{"gate": {Cluster: "gate", AuthInfo: "gate"}},
		CurrentContext: "gate",
	})
}

func (g *Gate) close() {
	if g == nil {
		return
	}
	_ = g.srv.Close()
	utilnet.CloseIdleConnectionsFor(g.transport)
}
