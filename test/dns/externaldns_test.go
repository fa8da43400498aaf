package dns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/neighbours"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/localrun"
)

// externalDNSArgs are external-dns's flags as a datacenter runs it
// against its BIND: Services only, the rfc2136 provider signing its
// updates and zone transfers (the transfer is how it reads the records it
// owns, for --policy=sync to delete them) with the TSIG key, the TXT
// registry under owner. v0.22 reads one annotation prefix, prefix, its
// own (external-dns.kubernetes.io/) unless --annotation-prefix names
// another, as a datacenter whose manifests use the older prefix sets it.
// It syncs on every Service event and every 2 s, so a scenario waits
// seconds, not the default minute. It matches names to the zone without
// its final dot.
func (w *world) externalDNSArgs(kubeconfig string, metricsPort int, prefix, owner string) []string {
	host, port := w.named.server()
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--source=service",
		"--provider=rfc2136",
		"--rfc2136-host=" + host, "--rfc2136-port=" + port, "--rfc2136-zone=" + strings.TrimSuffix(zone, "."),
		"--rfc2136-tsig-keyname=" + keyName, "--rfc2136-tsig-secret=" + w.named.secret, "--rfc2136-tsig-secret-alg=" + keyAlg,
		"--rfc2136-axfr",
		"--domain-filter=" + strings.TrimSuffix(zone, "."),
		"--policy=sync",
		"--registry=txt", "--txt-owner-id=" + owner,
		"--interval=2s", "--events", "--min-event-sync-interval=1s",
		fmt.Sprintf("--metrics-address=127.0.0.1:%d", metricsPort),
		"--log-level=debug",
	}
	if prefix != neighbours.ExternalDNSPrefix {
		args = append(args, "--annotation-prefix="+prefix)
	}
	return args
}

// startExternalDNS starts bin/external-dns as the user name in
// system:masters, reading prefix and owning its records as owner, its
// kubeconfig and log in the world's directory; the world stops it.
func (w *world) startExternalDNS(name, prefix, owner string) error {
	kc, err := w.Kubeconfig(name, "system:masters")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(w.dir, name+".kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	metricsPort, err := localrun.FreePort()
	if err != nil {
		return err
	}
	p, err := startProc(name, filepath.Join(w.dir, name+".log"), externalDNSBin, w.externalDNSArgs(kubeconfig, metricsPort, prefix, owner)...)
	if err != nil {
		return err
	}
	w.externalDNS = append(w.externalDNS, p)
	return nil
}

// newPrefix: external-dns as v0.22 runs by default, reading its own
// prefix, beside the first one (each deletes only the records it owns):
// a Service asking for its name under that prefix gets the target there,
// and its name resolves to the reserved address only.
func (w *world) newPrefix(t *testing.T) {
	if err := w.startExternalDNS("external-dns-v022", web.prefix, clusterName+"-v022"); err != nil {
		t.Fatal(err)
	}
	addr, _ := w.publish(t, web)
	w.targets(t, web, addr)
	w.resolves(t, web, addr)
}
