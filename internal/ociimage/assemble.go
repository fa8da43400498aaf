package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Files under Options.Out.
const (
	LayoutDir   = "oci"
	TarballFile = "scw-lb-ipam.tar"
	DigestFile  = "index.digest"
	SBOMFile    = "sbom.spdx.json"
)

const (
	// User is the numeric uid:gid the image runs as: the chart's
	// runAsUser/runAsGroup. Numeric because the image has no /etc/passwd.
	User = "65532:65532"
	// License is the project's SPDX license identifier.
	License = "Apache-2.0"
)

// OCI annotation keys, used as image labels and index annotations.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelLicenses = "org.opencontainers.image.licenses"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	labelDescr    = "org.opencontainers.image.description"
	labelRefName  = "org.opencontainers.image.ref.name"
)

// Assemble writes the image of bins (GOARCH -> path of the linux binary)
// under o.Out: the OCI layout, the docker tarball and the index digest,
// which it returns ("sha256:…").
func Assemble(o Options, bins map[string]string) (string, error) {
	if o.Version == "" || o.Repository == "" {
		return "", fmt.Errorf("a version and a repository are required")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	for _, arch := range o.arches() {
		bin, ok := bins[arch]
		if !ok {
			return "", fmt.Errorf("no linux/%s binary", arch)
		}
		img, err := platformImage(o, arch, bin)
		if err != nil {
			return "", fmt.Errorf("linux/%s: %w", arch, err)
		}
		images[arch] = img
		p := platform(arch)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: notArtifact{img}, Descriptor: v1.Descriptor{Platform: &p}})
	}
	// Registries (GHCR) show an index's own annotations, not its images'
	// labels.
	idx = mutate.Annotations(idx, labels(o)).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}

	ref, err := name.NewTag(o.Repository + ":" + o.Version)
	if err != nil {
		return "", err
	}
	if err := writeLayout(o, ref, idx); err != nil {
		return "", err
	}
	arch := o.TarballArch
	if arch == "" {
		arch = "amd64"
	}
	img, ok := images[arch]
	if !ok {
		return "", fmt.Errorf("no linux/%s image for the docker tarball", arch)
	}
	if err := tarball.WriteToFile(filepath.Join(o.Out, TarballFile), ref, img); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(o.Out, DigestFile), []byte(digest.String()+"\n"), 0o644); err != nil {
		return "", err
	}
	return digest.String(), nil
}

// writeLayout writes idx as the OCI layout under o.Out, from nothing: a
// layout is appended to, never overwritten. Its index.json points at the
// image index, as a registry would, named for tools that take an OCI
// layout by tag (oci:bin/image/oci:VERSION, containerd's import).
func writeLayout(o Options, ref name.Tag, idx v1.ImageIndex) error {
	dir := filepath.Join(o.Out, LayoutDir)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		labelRefName:               o.Version,
		"io.containerd.image.name": ref.String(),
	}))
}

// platformImage is the one-layer image of bin for linux/arch.
func platformImage(o Options, arch, bin string) (v1.Image, error) {
	layer, err := binaryLayer(bin, o.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	// empty.Image is a Docker manifest; the OCI media types make the whole
	// index OCI (docker load and every registry take both).
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		// Without a history entry, tools show the layer as made at year 1.
		History: v1.History{Created: created, CreatedBy: "scw-image: COPY " + BinaryName + " /"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	p := platform(arch)
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{"/" + BinaryName},
		Labels:     labels(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, created)
}

// binaryLayer is a gzip layer holding bin as /scw-lb-ipam, root-owned,
// 0755, modified at created. It is compressed once, here: a layer made from
// an uncompressed tar would be gzipped again for its digest, the layout and
// the tarball.
func binaryLayer(bin string, created time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     BinaryName,
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  created.UTC(),
		Format:   tar.FormatUSTAR,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// gzip's header carries no name and a zero mtime unless set: nothing
	// of the build machine leaks into the digest.
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// notArtifact is an image whose index entry has no artifactType:
// go-containerregistry sets it to the config's media type, which the OCI
// spec reserves for artifacts, and docker buildx leaves out for images.
type notArtifact struct{ v1.Image }

func (notArtifact) ArtifactType() (string, error) { return "", nil }

// platform is linux/arch, with arm64's variant as docker and containerd
// record it.
func platform(arch string) v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// labels are the OCI labels of o, empty values left out.
func labels(o Options) map[string]string {
	l := map[string]string{
		LabelSource:   o.Source,
		LabelVersion:  o.Version,
		LabelRevision: o.Revision,
		LabelLicenses: License,
		LabelCreated:  o.Created.UTC().Format(time.RFC3339),
		LabelTitle:    BinaryName,
		labelDescr:    "Stable private IPs for Scaleway Load Balancers, reserved in Scaleway IPAM at Service admission.",
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}
