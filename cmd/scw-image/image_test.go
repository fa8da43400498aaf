package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/ociimage"
)

// TestImageIsReproducible runs what make image runs, twice, into two
// directories, and requires byte-identical outputs: the binaries of each
// architecture (go build runs twice, so the link is proven deterministic;
// the compile comes from the build cache and is Go's own reproducibility
// guarantee, for a given toolchain), the OCI layout, the docker tarball and
// the SBOM. Then it reads the image as a runtime would.
func TestImageIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds scw-lb-ipam for two architectures, twice")
	}
	start := time.Now()
	dir := t.TempDir()
	tool := filepath.Join(dir, "scw-image")
	// The tool is built without -race, as make image runs it: the image is
	// assembled in seconds instead of minutes.
	goCmd(t, "build", "-o", tool, ".")

	version := chartAppVersion(t)
	const (
		revision = "0123456789abcdef0123456789abcdef01234567"
		epoch    = 1700000000
	)
	// The architectures make image builds: IMAGE_ARCHES, as make test
	// passes it (amd64: the arm64 image is built where it is released), or
	// every one.
	arches := ociimage.Arches()
	if env := os.Getenv("IMAGE_ARCHES"); env != "" {
		arches = strings.Split(env, ",")
	}
	outs := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	for _, out := range outs {
		cmd := exec.Command(tool, "build", "-out", out, "-version", version, "-revision", revision,
			"-source-date-epoch", "1700000000", "-repository", "ghcr.io/example/scw-lb-ipam", "-arches", strings.Join(arches, ","))
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1") // the flag wins
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scw-image build: %v\n%s", err, b)
		} else {
			t.Logf("%s", b)
		}
	}
	t.Logf("two builds in %v", time.Since(start).Round(time.Second))
	sameTree(t, outs[0], outs[1])

	idx := imageIndex(t, filepath.Join(outs[0], ociimage.LayoutDir))
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(epoch, 0).UTC()
	wantLabels := map[string]string{
		ociimage.LabelVersion:  version,
		ociimage.LabelRevision: revision,
		ociimage.LabelCreated:  "2023-11-14T22:13:20Z",
		ociimage.LabelLicenses: "Apache-2.0",
		ociimage.LabelSource:   "https://github.com/scw-lb-ipam/scw-lb-ipam",
		ociimage.LabelTitle:    "scw-lb-ipam",
	}
	for k, v := range wantLabels {
		if m.Annotations[k] != v {
			t.Errorf("index annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	if len(m.Manifests) != len(arches) {
		t.Fatalf("%d manifests, want %d", len(m.Manifests), len(arches))
	}
	for i, arch := range arches {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Errorf("manifest %d: platform %+v, want linux/%s", i, d.Platform, arch)
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Time.Equal(created) {
			t.Errorf("linux/%s config: os %s, architecture %s, created %v", arch, cf.OS, cf.Architecture, cf.Created)
		}
		c := cf.Config
		if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/scw-lb-ipam" || len(c.Cmd) != 0 || len(c.Env) != 0 {
			t.Errorf("linux/%s config: user %q, entrypoint %q, cmd %q, env %q", arch, c.User, c.Entrypoint, c.Cmd, c.Env)
		}
		for k, v := range wantLabels {
			if c.Labels[k] != v {
				t.Errorf("linux/%s label %s = %q, want %q", arch, k, c.Labels[k], v)
			}
		}
		want, err := os.ReadFile(filepath.Join(outs[0], "linux-"+arch, "scw-lb-ipam"))
		if err != nil {
			t.Fatal(err)
		}
		onlyTheBinary(t, img, want, created)
	}

	sbom(t, filepath.Join(outs[0], ociimage.SBOMFile), version)

	// What the chart's end-to-end test does: run the image's binary.
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		bin, err := ociimage.ExtractBinary(filepath.Join(outs[0], ociimage.LayoutDir), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s version: %v\n%s", bin, err, out)
		}
		if want := "scw-lb-ipam " + version + " (revision " + revision + ") go1."; !strings.HasPrefix(string(out), want) {
			t.Errorf("%s version = %q, want %q…", bin, out, want)
		}
	}
	t.Logf("done in %v", time.Since(start).Round(time.Second))
}

// onlyTheBinary requires img's one layer to hold /scw-lb-ipam, root's, 0755,
// modified at created, with the content of want, and nothing else.
func onlyTheBinary(t *testing.T, img v1.Image, want []byte, created time.Time) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if h.Name != "scw-lb-ipam" || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("layer entry %q: type %c, mode %o, uid %d, gid %d, mtime %v", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime)
		}
		got, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("layer entry %q: %d bytes, not the binary built (%d bytes)", h.Name, len(got), len(want))
		}
	}
	if n != 1 {
		t.Errorf("the layer has %d entries, want 1", n)
	}
}

// sbom requires the SPDX document to list the main module at the release
// version and controller-runtime at go.mod's version.
func sbom(t *testing.T, path, version string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name         string `json:"name"`
			VersionInfo  string `json:"versionInfo"`
			Checksums    []struct{ Algorithm, ChecksumValue string }
			ExternalRefs []struct{ ReferenceLocator string }
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	crVersion := strings.TrimSpace(goCmd(t, "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/controller-runtime"))
	want := map[string]string{
		"github.com/scw-lb-ipam/scw-lb-ipam": "v" + version,
		"sigs.k8s.io/controller-runtime":     crVersion,
	}
	for _, p := range doc.Packages {
		v, ok := want[p.Name]
		if !ok {
			continue
		}
		delete(want, p.Name)
		if p.VersionInfo != v {
			t.Errorf("SBOM: %s %s, want %s", p.Name, p.VersionInfo, v)
		}
		if len(p.ExternalRefs) != 1 || p.ExternalRefs[0].ReferenceLocator != "pkg:golang/"+p.Name+"@"+v {
			t.Errorf("SBOM: %s purls %+v", p.Name, p.ExternalRefs)
		}
		if p.Name == "sigs.k8s.io/controller-runtime" && (len(p.Checksums) != 1 || len(p.Checksums[0].ChecksumValue) != 64) {
			t.Errorf("SBOM: %s checksums %+v, want its h1 hash as SHA256", p.Name, p.Checksums)
		}
	}
	for name := range want {
		t.Errorf("SBOM: no package %s", name)
	}
}

// sameTree requires a and b to hold the same files with the same content.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	files := func(root string) map[string]bool {
		m := map[string]bool{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(root, p)
				m[rel] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fa, fb := files(a), files(b)
	for f := range fb {
		if !fa[f] {
			t.Errorf("%s only in the second build", f)
		}
	}
	for f := range fa {
		if !fb[f] {
			t.Errorf("%s only in the first build", f)
			continue
		}
		ca, _ := os.ReadFile(filepath.Join(a, f))
		cb, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(ca, cb) {
			t.Errorf("%s differs between two builds", f)
		}
	}
	if len(fa) < 6 {
		t.Errorf("the build wrote %d files", len(fa))
	}
}

func imageIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := root.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index.json: %v, %v", m, err)
	}
	idx, err := root.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// chartAppVersion is the version make image stamps: the chart's appVersion.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../charts/scw-lb-ipam/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion %q: %v", c.AppVersion, err)
	}
	return c.AppVersion
}

func goCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "a command is required"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"build", "-out", t.TempDir()}, "-version is required"},
		{[]string{"build", "-version", "1.0.0", "-source-date-epoch", "yesterday"}, `SOURCE_DATE_EPOCH "yesterday"`},
		{[]string{"push"}, "-repository is required"},
	} {
		if err := run(ctx, c.args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v, want %q", c.args, err, c.want)
		}
	}
}
