package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// bundle is the Secret's content: the CA that signs, the CA bundle clients
// trust (the signing CA, plus the previous one while it is still valid), and
// the serving pair.
type bundle struct {
	caCert, caKey   []byte // PEM
	caBundle        []byte // PEM, one or two certificates
	tlsCert, tlsKey []byte // PEM
}

// Keys of the Secret.
const (
	keyCACert   = "ca.crt"
	keyCAKey    = "ca.key"
	keyCABundle = "ca-bundle.crt"
	keyTLSCert  = "tls.crt"
	keyTLSKey   = "tls.key"
)

func (b *bundle) data() map[string][]byte {
	return map[string][]byte{keyCACert: b.caCert, keyCAKey: b.caKey, keyCABundle: b.caBundle, keyTLSCert: b.tlsCert, keyTLSKey: b.tlsKey}
}

func bundleFrom(data map[string][]byte) *bundle {
	return &bundle{caCert: data[keyCACert], caKey: data[keyCAKey], caBundle: data[keyCABundle], tlsCert: data[keyTLSCert], tlsKey: data[keyTLSKey]}
}

// newKey makes an ECDSA P-256 key: small, fast, accepted by the apiserver.
func newKey() (*ecdsa.PrivateKey, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
}

// issue makes a key and a certificate from tmpl, signed by parentKey as
// parent, or self-signed when parent is nil. It sets the serial and a
// NotBefore slightly in the past, to tolerate clock skew.
func issue(now time.Time, tmpl, parent *x509.Certificate, parentKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = now.Add(-5 * time.Minute)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// newCA creates a self-signed CA valid from now for validity.
func newCA(now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	return issue(now, &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("scw-lb-ipam webhook CA %s", now.UTC().Format("2006-01-02"))},
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
}

// newServing signs a serving certificate for dnsNames with the CA.
func newServing(now time.Time, validity time.Duration, dnsNames []string, caCertPEM, caKeyPEM []byte) (certPEM, keyPEM []byte, err error) {
	caCert, err := parseCert(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	caKey, err := parseKey(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	notAfter := now.Add(validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter // never outlive the signer
	}
	return issue(now, &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
}

func parseCert(p []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(p []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(p)
	if b == nil {
		return nil, errors.New("no PEM key")
	}
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("the key cannot sign")
	}
	return s, nil
}

// needsRenewal reports whether a certificate is missing, unreadable, or
// past the point where renewBefore of its lifetime is left.
func needsRenewal(certPEM []byte, now time.Time, renewFraction float64) bool {
	c, err := parseCert(certPEM)
	if err != nil {
		return true
	}
	life := c.NotAfter.Sub(c.NotBefore)
	return now.After(c.NotAfter.Add(-time.Duration(float64(life) * renewFraction)))
}

// servesNames reports whether the serving certificate covers dnsNames and
// was signed by the CA.
func servesNames(b *bundle, dnsNames []string) bool {
	c, err := parseCert(b.tlsCert)
	if err != nil {
		return false
	}
	ca, err := parseCert(b.caCert)
	if err != nil || c.CheckSignatureFrom(ca) != nil {
		return false
	}
	for _, n := range dnsNames {
		if !slices.Contains(c.DNSNames, n) {
			return false
		}
	}
	return true
}

// trustBundle is the new CA plus the old one while it is still valid, so
// that clients trusting either accept the serving certificate during a
// rotation.
func trustBundle(newCA, oldCA []byte, now time.Time) []byte {
	out := bytes.Clone(newCA)
	if c, err := parseCert(oldCA); err == nil && now.Before(c.NotAfter) && !bytes.Equal(oldCA, newCA) {
		out = append(out, oldCA...)
	}
	return out
}
