package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

func newFake(t *testing.T) client.Client {
	t.Helper()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "scw-lb-ipam"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "services.scw-lb-ipam.io"}},
	}
	return fixtures.FakeKube().WithObjects(mwc).Build()
}

func keeper(c client.Client, clk *clocktesting.FakeClock, dir string) *Keeper {
	return New(Options{Client: c, Namespace: "scw-lb-ipam", SecretName: "scw-lb-ipam-tls", ServiceName: "scw-lb-ipam",
		WebhookConfigName: "scw-lb-ipam", CertDir: dir, Clock: clk, Log: logr.Discard(),
		CAValidity: 30 * 24 * time.Hour, ServingValidity: 9 * 24 * time.Hour})
}

func secret(t *testing.T, c client.Client) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "scw-lb-ipam", Name: "scw-lb-ipam-tls"}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func caBundle(t *testing.T, c client.Client) []byte {
	t.Helper()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "scw-lb-ipam"}, mwc); err != nil {
		t.Fatal(err)
	}
	return mwc.Webhooks[0].ClientConfig.CABundle
}

// verify checks the files on disk chain to the patched caBundle for the
// Service's name at the clock's time.
func verify(t *testing.T, dir string, bundlePEM []byte, now time.Time) *x509.Certificate {
	t.Helper()
	certPEM, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	leaf, err := parseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundlePEM) {
		t.Fatal("caBundle holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "scw-lb-ipam.scw-lb-ipam.svc", CurrentTime: now}); err != nil {
		t.Fatalf("the served certificate does not verify against the caBundle: %v", err)
	}
	return leaf
}

func TestCreateShareAndRotate(t *testing.T) {
	c := newFake(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := keeper(c, clk, dirA), keeper(c, clk, dirB)
	ctx := context.Background()

	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first := secret(t, c)
	leafA := verify(t, dirA, caBundle(t, c), clk.Now())

	// A second replica reuses the Secret as it is.
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if secret(t, c).ResourceVersion != first.ResourceVersion {
		t.Fatal("the second replica rewrote the Secret")
	}
	if leafB := verify(t, dirB, caBundle(t, c), clk.Now()); !leafB.Equal(leafA) {
		t.Fatal("the replicas serve different certificates")
	}

	// Two thirds into the serving certificate's life: renewed, same CA.
	clk.Step(7 * 24 * time.Hour)
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := secret(t, c)
	if bytes.Equal(renewed.Data[keyTLSCert], first.Data[keyTLSCert]) || !bytes.Equal(renewed.Data[keyCACert], first.Data[keyCACert]) {
		t.Fatal("serving certificate not renewed, or the CA changed with it")
	}
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if leaf := verify(t, dirA, caBundle(t, c), clk.Now()); leaf.Equal(leafA) {
		t.Fatal("replica A still serves the old certificate")
	}

	// Two thirds into the CA's life: a new CA; the old one stays trusted.
	clk.Step(14 * 24 * time.Hour)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	rotated := secret(t, c)
	if bytes.Equal(rotated.Data[keyCACert], first.Data[keyCACert]) {
		t.Fatal("CA not rotated")
	}
	if !bytes.Contains(caBundle(t, c), first.Data[keyCACert]) || !bytes.Contains(caBundle(t, c), rotated.Data[keyCACert]) {
		t.Fatal("the caBundle does not hold both CAs during the rotation")
	}
	verify(t, dirA, caBundle(t, c), clk.Now())
}

func TestConcurrentReplicasAgree(t *testing.T) {
	c := newFake(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const n = 5
	dirs := make([]string, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		dirs[i] = t.TempDir()
		wg.Go(func() { errs[i] = keeper(c, clk, dirs[i]).Ensure(context.Background()) })
	}
	wg.Wait()
	want := secret(t, c).Data[keyTLSCert]
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		got, _ := os.ReadFile(filepath.Join(dirs[i], "tls.crt"))
		if !bytes.Equal(got, want) {
			t.Fatalf("replica %d serves a certificate that is not the Secret's", i)
		}
	}
}

func TestRenewsWhenNamesChange(t *testing.T) {
	c := newFake(t)
	clk := clocktesting.NewFakeClock(time.Now())
	if err := keeper(c, clk, t.TempDir()).Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := secret(t, c).Data[keyTLSCert]
	k := New(Options{Client: c, Namespace: "scw-lb-ipam", SecretName: "scw-lb-ipam-tls", ServiceName: "renamed", CertDir: t.TempDir(), Clock: clk, Log: logr.Discard()})
	if err := k.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, secret(t, c).Data[keyTLSCert]) {
		t.Fatal("a renamed Service kept a certificate without its name")
	}
}
