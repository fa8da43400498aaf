package ociimage

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	// MainPackage is the command the image runs.
	MainPackage = "github.com/scw-lb-ipam/scw-lb-ipam/cmd/scw-lb-ipam"
	// versionPackage holds the variables -X stamps.
	versionPackage = "github.com/scw-lb-ipam/scw-lb-ipam/internal/version"
	// BinaryName is the image's one file, at its root, and its entrypoint.
	BinaryName = "scw-lb-ipam"
)

// Arches are the linux architectures of the released image index, in its
// order.
func Arches() []string { return []string{"amd64", "arm64"} }

// arches are the architectures o builds: o.Arches in Arches' order, or
// every one.
func (o Options) arches() []string {
	if len(o.Arches) == 0 {
		return Arches()
	}
	var out []string
	for _, a := range Arches() {
		if slices.Contains(o.Arches, a) {
			out = append(out, a)
		}
	}
	return out
}

// CheckArches refuses an architecture the image is not released for, and
// a docker tarball of one it does not build.
func (o Options) CheckArches() error {
	for _, a := range o.Arches {
		if !slices.Contains(Arches(), a) {
			return fmt.Errorf("architecture %q: the image is built for %s", a, strings.Join(Arches(), ", "))
		}
	}
	if arch := cmp.Or(o.TarballArch, "amd64"); !slices.Contains(o.arches(), arch) {
		return fmt.Errorf("the docker tarball's architecture %s is not among those built (%s)", arch, strings.Join(o.arches(), ", "))
	}
	return nil
}

// Options say what to build and how to name it. Version, Revision, Created
// and Source are all of the image that is not the commit's code: two builds
// with equal values from one commit and Go toolchain give one index digest.
type Options struct {
	// Dir is a directory of the module, where go build runs ("" = current).
	Dir string
	// Out receives linux-ARCH/scw-lb-ipam, oci/, scw-lb-ipam.tar,
	// index.digest and sbom.spdx.json.
	Out string
	// Version is the release version without "v" (the chart's appVersion).
	Version string
	// Revision is the commit; empty leaves the binary and labels without one.
	Revision string
	// Created is SOURCE_DATE_EPOCH: every timestamp in the image.
	Created time.Time
	// Source is the repository's URL (org.opencontainers.image.source).
	Source string
	// Repository names the image in the docker tarball and the layout
	// (REPOSITORY:VERSION), e.g. ghcr.io/scw-lb-ipam/scw-lb-ipam.
	Repository string
	// TarballArch is the platform the docker tarball holds: docker load
	// takes no image index, so the tarball carries one image ("" = amd64).
	TarballArch string
	// Arches are the architectures built (nil = Arches()): the tests build
	// the one they run, the release every one.
	Arches []string
}

// Build builds the binaries into o.Out, then the image and the SBOM from
// them, and returns the image index's digest.
func Build(ctx context.Context, o Options) (string, error) {
	if err := o.CheckArches(); err != nil {
		return "", err
	}
	bins := map[string]string{}
	for _, arch := range o.arches() {
		dst := filepath.Join(o.Out, "linux-"+arch, BinaryName)
		if err := BuildBinary(ctx, o, arch, dst); err != nil {
			return "", err
		}
		bins[arch] = dst
	}
	digest, err := Assemble(o, bins)
	if err != nil {
		return "", err
	}
	if err := WriteSBOM(filepath.Join(o.Out, SBOMFile), o, digest, bins); err != nil {
		return "", err
	}
	return digest, nil
}

// BuildBinary builds the static linux/arch binary into dst, stamped with
// o.Version and o.Revision.
func BuildBinary(ctx context.Context, o Options, arch, dst string) error {
	dst, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", versionPackage, o.Version, versionPackage, o.Revision)
	// -trimpath and -buildvcs=false keep the checkout's path and state (a
	// dirty tree, the commit time) out of the binary: the revision is
	// stamped instead. The binary carries no DWARF (-w), so the compiler
	// writes none: a fifth faster, and the packages make test compiles
	// for its tests are these.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-gcflags=all=-dwarf=false", "-ldflags", ldflags, "-o", dst, MainPackage)
	cmd.Dir = o.Dir
	// Everything else that changes the output is pinned here rather than
	// taken from the caller's environment: a GOAMD64=v3 or a GOFLAGS in a
	// shell profile would otherwise give another digest.
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build linux/%s: %w", arch, err)
	}
	return nil
}
