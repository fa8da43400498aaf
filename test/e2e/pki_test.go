package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki is the cluster's certificate authority, with its files in dir: the
// apiserver's serving pair, the admin's client pair (system:masters, used by
// every component and the tests) and the ServiceAccount signing key.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// Files of pki.dir.
const (
	caFile        = "ca.crt"
	saKeyFile     = "sa.key"
	saPubFile     = "sa.pub"
	apiserverPair = "apiserver"
	adminPair     = "admin"
)

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "scw-lb-ipam-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caKey: key}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, caFile), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	// The ServiceAccount tokens' signing key, apart from the CA's.
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, saKeyFile), "EC PRIVATE KEY", saDER); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, saPubFile), "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	// Pods reach the apiserver at the kubernetes Service's address and
	// verify it against kube-root-ca.crt; the node's components and the
	// tests at the bridge address.
	if err := p.issue(apiserverPair, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		[]net.IP{net.ParseIP(kubernetesServiceIP), net.ParseIP(nodeIP), net.ParseIP("127.0.0.1")}); err != nil {
		return nil, err
	}
	if err := p.issue(adminPair, pkix.Name{CommonName: "scw-lb-ipam-e2e-admin", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// issue writes name.crt and name.key, signed by the CA.
func (p *pki) issue(name string, subject pkix.Name, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dnsNames, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("issuing %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(p.path(name+".key"), "EC PRIVATE KEY", keyDER)
}

func (p *pki) path(file string) string { return filepath.Join(p.dir, file) }

// kubeconfig writes the admin's kubeconfig for the apiserver at server.
func (p *pki) kubeconfig(path, server string) error {
	return clientcmd.WriteToFile(*p.config(server, adminPair), path)
}

// config is a kubeconfig of client pair pair for the apiserver at server.
func (p *pki) config(server, pair string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.path(caFile)}
	cfg.AuthInfos[pair] = &clientcmdapi.AuthInfo{ClientCertificate: p.path(pair + ".crt"), ClientKey: p.path(pair + ".key")}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: pair}
	cfg.CurrentContext = "e2e"
	return cfg
}

// userKubeconfig issues a client pair for user in groups (once per name)
// and returns its kubeconfig for the apiserver at server.
func (p *pki) userKubeconfig(name, server, user string, groups ...string) ([]byte, error) {
	if _, err := os.Stat(p.path(name + ".crt")); err != nil {
		if err := p.issue(name, pkix.Name{CommonName: user, Organization: groups}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
			return nil, err
		}
	}
	return clientcmd.Write(*p.config(server, name))
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
