package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fakeImage assembles an image of small fake binaries (no go build), each
// saying which architecture it is for, and returns its options.
func fakeImage(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	o := Options{
		Out:        filepath.Join(dir, "image"),
		Version:    "1.2.3",
		Revision:   "0123abc",
		Created:    time.Unix(1700000000, 0),
		Source:     "https://example.com/scw-lb-ipam",
		Repository: "ghcr.io/example/scw-lb-ipam",
	}
	bins := map[string]string{}
	for _, arch := range Arches() {
		bins[arch] = filepath.Join(dir, arch)
		if err := os.WriteFile(bins[arch], []byte("binary for "+arch), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Assemble(o, bins); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestExtractBinary(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the image has no %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	o := fakeImage(t)
	dst := filepath.Join(t.TempDir(), "out")
	path, err := ExtractBinary(filepath.Join(o.Out, LayoutDir), dst)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dst, BinaryName) {
		t.Errorf("path = %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "binary for " + runtime.GOARCH; string(b) != want {
		t.Errorf("content = %q, want %q", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode = %v, want 0755", fi.Mode())
	}
	// Again, over the first: a test may extract into the same place twice.
	if _, err := ExtractBinary(filepath.Join(o.Out, LayoutDir), dst); err != nil {
		t.Fatal(err)
	}
}

func TestExtractBinaryErrors(t *testing.T) {
	if _, err := ExtractBinary(t.TempDir(), t.TempDir()); err == nil {
		t.Error("no layout: no error")
	}
	o := fakeImage(t)
	idx, err := imageIndex(filepath.Join(o.Out, LayoutDir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := findImage(idx, v1.Platform{OS: "windows", Architecture: "amd64"}); err == nil || !strings.Contains(err.Error(), "no image for windows/amd64") {
		t.Errorf("err = %v", err)
	}
}

func TestAssembleIsDeterministic(t *testing.T) {
	a, b := fakeImage(t), fakeImage(t)
	da, _ := os.ReadFile(filepath.Join(a.Out, DigestFile))
	db, _ := os.ReadFile(filepath.Join(b.Out, DigestFile))
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Errorf("digests %q and %q", da, db)
	}
	ta, _ := os.ReadFile(filepath.Join(a.Out, TarballFile))
	tb, _ := os.ReadFile(filepath.Join(b.Out, TarballFile))
	if len(ta) == 0 || !bytes.Equal(ta, tb) {
		t.Error("the docker tarballs differ")
	}
}

func TestPush(t *testing.T) {
	o := fakeImage(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	repo := u.Host + "/example/scw-lb-ipam"
	chart := t.TempDir()
	writeChart := func(version, appVersion string) {
		c := "apiVersion: v2\nname: scw-lb-ipam\nversion: " + version + "\nappVersion: \"" + appVersion + "\"\n"
		if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	push := func(tag string) (name.Digest, error) {
		return Push(context.Background(), PushOptions{
			Layout: filepath.Join(o.Out, LayoutDir), Repository: repo, GitTag: tag, Chart: chart,
			Options: []remote.Option{remote.WithTransport(srv.Client().Transport)},
		})
	}

	writeChart("1.2.3", "1.2.3")
	if _, err := push("v1.2.4"); err == nil || !strings.Contains(err.Error(), "tag v1.2.4 does not release the image's version 1.2.3") {
		t.Errorf("wrong tag: err = %v", err)
	}
	writeChart("1.2.2", "1.2.3")
	if _, err := push("v1.2.3"); err == nil || !strings.Contains(err.Error(), `version "1.2.2" and appVersion "1.2.3"`) {
		t.Errorf("chart version behind: err = %v", err)
	}

	writeChart("1.2.3", "1.2.3")
	ref, err := push("v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(o.Out, DigestFile))
	if ref.DigestStr() != strings.TrimSpace(string(want)) {
		t.Errorf("pushed %s, want digest %s", ref, want)
	}
	// The tag is the version, and names the very index built.
	tag, err := name.NewTag(repo + ":1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(tag, remote.WithTransport(srv.Client().Transport))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d.String() != ref.DigestStr() {
		t.Errorf("%s:1.2.3 is %s, want %s", repo, d, ref.DigestStr())
	}
}

func TestPurl(t *testing.T) {
	for _, c := range []struct{ path, version, want string }{
		{"sigs.k8s.io/controller-runtime", "v0.25.2", "pkg:golang/sigs.k8s.io/controller-runtime@v0.25.2"},
		{"github.com/docker/cli", "v29.7.2+incompatible", "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible"},
		{"stdlib", "1.26.8", "pkg:golang/stdlib@1.26.8"},
	} {
		if got := purl(c.path, c.version).ReferenceLocator; got != c.want {
			t.Errorf("purl(%s, %s) = %s, want %s", c.path, c.version, got, c.want)
		}
	}
	if got := escapeModulePath("github.com/Azure/go-ansiterm"); got != "github.com/!azure/go-ansiterm" {
		t.Errorf("escapeModulePath = %s", got)
	}
}

func TestSPDXIDsAreUnique(t *testing.T) {
	ids := spdxIDs{}
	a, b := ids.next("Package-a/b"), ids.next("Package-a-b")
	if a != "SPDXRef-Package-a-b" || b != "SPDXRef-Package-a-b-2" {
		t.Errorf("ids %s, %s", a, b)
	}
}

func TestCheckArches(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, ""},
		{Options{Arches: []string{"amd64"}}, ""},
		{Options{Arches: []string{"arm64"}, TarballArch: "arm64"}, ""},
		{Options{Arches: []string{"x86"}}, `architecture "x86": the image is built for amd64, arm64`},
		{Options{Arches: []string{"arm64"}}, "the docker tarball's architecture amd64 is not among those built (arm64)"},
	} {
		err := tc.o.CheckArches()
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("CheckArches(%v, tarball %q) = %v, want %q", tc.o.Arches, tc.o.TarballArch, err, tc.want)
		}
	}
}

// TestPinChart: the pinned copy of the chart differs from it by the
// image.digest line only; a digest that is not one, or a values.yaml
// without that line once, is refused and nothing is packaged from it.
func TestPinChart(t *testing.T) {
	src := filepath.Join("..", "..", "charts", "scw-lb-ipam")
	digest := "sha256:" + strings.Repeat("ab", 32)
	dst := filepath.Join(t.TempDir(), "scw-lb-ipam")
	if err := PinChart(src, dst, digest); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(src, "values.yaml"))
	after, _ := os.ReadFile(filepath.Join(dst, "values.yaml"))
	if want := strings.Replace(string(before), "\n  digest: \"\"\n", "\n  digest: "+digest+"\n", 1); string(after) != want || string(after) == string(before) {
		t.Errorf("the pinned values.yaml is not the chart's with image.digest %s", digest)
	}
	for _, f := range []string{"Chart.yaml", "templates/deployment.yaml", "values.schema.json"} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s not copied as it is: %v", f, err)
		}
	}
	if err := PinChart(src, filepath.Join(t.TempDir(), "x"), "latest"); err == nil || !strings.Contains(err.Error(), "is not a sha256 digest") {
		t.Errorf("a tag for a digest: %v", err)
	}
	if err := PinChart(dst, filepath.Join(t.TempDir(), "y"), digest); err == nil || !strings.Contains(err.Error(), "want 1") {
		t.Errorf("an already pinned chart: %v", err)
	}
}
