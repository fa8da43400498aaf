package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestArtifactsVerify signs the image and the chart published to the
// suite's registry, as the release workflow signs them on GHCR, with
// cosign built from source and a throwaway key instead of the workflow's
// keyless identity (no Fulcio or Rekor here: the transparency log is left
// out on both sides). cosign verify passes for each by its tag, and fails
// once the tag is moved to other content: a re-pushed chart of the same
// version, an image index with one annotation more.
func TestArtifactsVerify(t *testing.T) {
	reg := startRegistry(t)
	version := reg.publish(t)
	dir := t.TempDir()
	cosign := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cluster.bin("cosign"), args...)
		cmd.Dir = dir
		// No password on the throwaway key; HOME keeps cosign's cache here.
		cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=", "HOME="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := cosign("generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	artifacts := map[string]string{
		"image": reg.addr + "/" + publishedImage + ":" + version,
		"chart": reg.addr + "/" + publishedChart + "/scw-lb-ipam:" + version,
	}
	verify := func(ref string) (string, error) {
		return cosign("verify", "--key", "cosign.pub", "--insecure-ignore-tlog", "--allow-http-registry", ref)
	}
	for what, tag := range artifacts {
		digest := headDigest(t, tag)
		signed := tag[:strings.LastIndex(tag, ":")] + "@" + digest.String()
		if out, err := cosign("sign", "--key", "cosign.key", "--use-signing-config=false", "--tlog-upload=false", "--allow-http-registry", "--yes", signed); err != nil {
			t.Fatalf("signing the %s %s: %v\n%s", what, signed, err, out)
		}
		out, err := verify(tag)
		if err != nil || !strings.Contains(out, digest.String()) {
			t.Errorf("cosign verify of the signed %s %s: %v\n%s", what, tag, err, out)
		}
	}

	// The image's tag moved to an index that differs by one annotation.
	imageRef, err := name.ParseReference(artifacts["image"], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(imageRef)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(imageRef, mutate.Annotations(idx, map[string]string{"tampered": "true"}).(v1.ImageIndex)); err != nil {
		t.Fatal(err)
	}
	// The chart's version pushed again, with a changed values.yaml.
	tampered := filepath.Join(t.TempDir(), "scw-lb-ipam")
	if err := os.CopyFS(tampered, os.DirFS(chartDir())); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(tampered, "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(values, append(b, "# tampered\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := t.TempDir()
	if out, err := helm(t, "package", tampered, "--version", version, "--destination", pkg); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	if out, err := helm(t, "push", filepath.Join(pkg, "scw-lb-ipam-"+version+".tgz"), "oci://"+reg.addr+"/"+publishedChart, "--plain-http"); err != nil {
		t.Fatalf("helm push: %v\n%s", err, out)
	}
	for what, tag := range artifacts {
		if out, err := verify(tag); err == nil || !strings.Contains(out, "no signatures found") {
			t.Errorf("cosign verify of the tampered %s %s: %v, want no signatures found\n%s", what, tag, err, out)
		}
	}
}

// headDigest is what tag points to in the registry.
func headDigest(t *testing.T, tag string) v1.Hash {
	t.Helper()
	ref, err := name.ParseReference(tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatalf("HEAD %s: %v", tag, err)
	}
	return desc.Digest
}
