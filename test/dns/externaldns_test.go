package dns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/internal/localrun"
)

// externalDNSArgs are external-dns's flags as a datacenter runs it
// against its BIND: Services only, the rfc2136 provider signing its
// updates and zone transfers (the transfer is how it reads the records it
// owns, for --policy=sync to delete them) with the TSIG key, the TXT
// registry under an owner of its own. v0.22 reads one annotation prefix,
// its new default unless --annotation-prefix names another: the scenarios'
// manifests use the prefix most manifests use. It syncs on every Service
// event and every 2 s, so a scenario waits seconds, not the default
// minute. It matches names to the zone without its final dot.
func (w *world) externalDNSArgs(kubeconfig string, metricsPort int) []string {
	host, port := w.named.server()
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--source=service",
		"--annotation-prefix=" + ccm.ExternalDNSPrefixLegacy,
		"--provider=rfc2136",
		"--rfc2136-host=" + host, "--rfc2136-port=" + port, "--rfc2136-zone=" + strings.TrimSuffix(zone, "."),
		"--rfc2136-tsig-keyname=" + keyName, "--rfc2136-tsig-secret=" + w.named.secret, "--rfc2136-tsig-secret-alg=" + keyAlg,
		"--rfc2136-axfr",
		"--domain-filter=" + strings.TrimSuffix(zone, "."),
		"--policy=sync",
		"--registry=txt", "--txt-owner-id=" + clusterName,
		"--interval=2s", "--events", "--min-event-sync-interval=1s",
		fmt.Sprintf("--metrics-address=127.0.0.1:%d", metricsPort),
		"--log-level=debug",
	}
}

// startExternalDNS starts bin/external-dns as a user of its own in
// system:masters, its kubeconfig and log in dir.
func (w *world) startExternalDNS(dir string) (*proc, error) {
	kc, err := w.Kubeconfig("external-dns", "system:masters")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "external-dns.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	metricsPort, err := localrun.FreePort()
	if err != nil {
		return nil, err
	}
	return startProc("external-dns", filepath.Join(dir, "external-dns.log"), externalDNSBin, w.externalDNSArgs(kubeconfig, metricsPort)...)
}
