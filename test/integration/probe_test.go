package integration

import (
	"crypto/tls"
	"net"
	"strconv"
	"time"
)

// tlsProbe checks that the webhook server accepts TLS connections.
type tlsProbe struct {
	host string
	port int
}

func (p *tlsProbe) dial() (net.Conn, error) {
	d := &net.Dialer{Timeout: time.Second}
	return tls.DialWithDialer(d, "tcp", net.JoinHostPort(p.host, strconv.Itoa(p.port)), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only a liveness probe
}
