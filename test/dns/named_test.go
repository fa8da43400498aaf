package dns

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// The datacenter's zone, which external-dns updates, and the TSIG key it
// signs its updates and zone transfers with.
const (
	zone    = "dc.example."
	keyName = "external-dns."
	keyAlg  = "hmac-sha256"
)

// named is a running named serving zone on 127.0.0.1:port.
type named struct {
	*proc
	port   int
	secret string // the TSIG key, base64
}

// namedConf lets the key update and transfer the zone and nothing else
// (no recursion: a lookup outside the zone is refused, never forwarded);
// every file is in the temporary directory dir.
const namedConf = `key "%[4]s" { algorithm %[5]s; secret "%[3]s"; };
options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	managed-keys-directory "%[1]s";
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
};
controls { };
zone "%[6]s" {
	type primary;
	file "%[1]s/zone.db";
	allow-update { key "%[4]s"; };
	allow-transfer { key "%[4]s"; };
};
`

// zoneFile is the zone before external-dns writes to it: its SOA and the
// name server's own name.
const zoneFile = `$TTL 30
@ IN SOA ns.%[1]s hostmaster.%[1]s 1 30 30 300 30
@ IN NS ns.%[1]s
ns IN A 127.0.0.1
`

// startNamed writes named's configuration, the zone and a fresh TSIG key
// into dir and starts bin (bin/named) in the foreground on a free
// loopback port, then waits until it answers for the zone.
func startNamed(bin, dir string) (*named, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	port, err := localrun.FreePort()
	if err != nil {
		return nil, err
	}
	n := &named{port: port, secret: base64.StdEncoding.EncodeToString(key)}
	conf := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, namedConf, dir, port, n.secret, keyName, keyAlg, zone), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "zone.db"), fmt.Appendf(nil, zoneFile, zone), 0o600); err != nil {
		return nil, err
	}
	// -g: foreground, logs to stderr; no -u: it runs as the test does.
	if n.proc, err = startProc("named", filepath.Join(dir, "named.log"), bin, "-g", "-c", conf); err != nil {
		return nil, err
	}
	ready := localrun.Poll(20*time.Second, 100*time.Millisecond, func() bool {
		addrs, err := n.lookup("ns." + zone)
		return err == nil && slices.Equal(addrs, []string{"127.0.0.1"}) || !n.running()
	})
	if !ready || !n.running() {
		n.stop()
		return nil, fmt.Errorf("named did not answer for ns.%s on 127.0.0.1:%d\n%s", zone, port, n.logTail())
	}
	return n, nil
}

// server is named's address, for external-dns's flags.
func (n *named) server() (host, port string) { return "127.0.0.1", strconv.Itoa(n.port) }

// lookup asks named, and only named, for the addresses of the absolute
// name host (no search domain applies), sorted. A name that does not exist
// is no error: no addresses.
func (n *named) lookup(host string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(n.server()))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, host)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return nil, nil
	}
	slices.Sort(addrs)
	return addrs, err
}
