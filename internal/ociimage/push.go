package ociimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"
)

// PushOptions say what a release pushes, and what it must agree with.
type PushOptions struct {
	// Layout is the OCI layout Assemble wrote (bin/image/oci).
	Layout string
	// Repository receives the index as REPOSITORY:VERSION.
	Repository string
	// GitTag, when set, must be "v" + the image's version.
	GitTag string
	// Chart, when set, is a chart directory whose version and appVersion
	// must both be the image's version.
	Chart string
	// Auth is the registry credential (nil = the docker config's).
	Auth authn.Authenticator
	// Options are passed to remote.WriteIndex (tests: a transport).
	Options []remote.Option
}

// Push checks that the image's version, the git tag and the chart agree,
// then pushes the image index to Repository, tagged with the version. It
// returns the pushed reference, by digest.
func Push(ctx context.Context, o PushOptions) (name.Digest, error) {
	idx, err := imageIndex(o.Layout)
	if err != nil {
		return name.Digest{}, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return name.Digest{}, err
	}
	version := m.Annotations[LabelVersion]
	if version == "" {
		return name.Digest{}, fmt.Errorf("%s: the image index has no %s annotation", o.Layout, LabelVersion)
	}
	if o.GitTag != "" && o.GitTag != "v"+version {
		return name.Digest{}, fmt.Errorf("tag %s does not release the image's version %s: tag v%s, or set the chart's appVersion", o.GitTag, version, version)
	}
	if o.Chart != "" {
		if err := checkChart(o.Chart, version); err != nil {
			return name.Digest{}, err
		}
	}
	tag, err := name.NewTag(o.Repository + ":" + version)
	if err != nil {
		return name.Digest{}, err
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, o.Options...)
	if o.Auth != nil {
		opts = append(opts, remote.WithAuth(o.Auth))
	} else {
		opts = append(opts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return name.Digest{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return tag.Context().Digest(digest.String()), nil
}

// imageIndex is the one image index the layout's index.json points at.
func imageIndex(dir string) (v1.ImageIndex, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: want one image index in index.json, found %d entries", dir, len(m.Manifests))
	}
	return root.ImageIndex(m.Manifests[0].Digest)
}

// checkChart fails unless the chart's version and appVersion are version:
// the chart, the image tag and the binary are released together.
func checkChart(dir, version string) error {
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return err
	}
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%s/Chart.yaml: %w", dir, err)
	}
	if c.Version != version || c.AppVersion != version {
		return fmt.Errorf("%s/Chart.yaml: version %q and appVersion %q must both be the image's version %q", dir, c.Version, c.AppVersion, version)
	}
	return nil
}

// PinChart writes a copy of the chart directory src to dst whose
// values.yaml runs the image by digest (image.digest): the chart a release
// publishes runs exactly the image it pushed, whatever a tag points at
// later. The line is rewritten in place, so that values.yaml's comments
// (the chart's documentation) stay as they are.
func PinChart(src, dst, digest string) error {
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		return fmt.Errorf("pinning the chart: %q is not a sha256 digest", digest)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return fmt.Errorf("pinning the chart: %w", err)
	}
	values := filepath.Join(dst, "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		return err
	}
	const unpinned = "\n  digest: \"\"\n"
	if n := strings.Count(string(b), unpinned); n != 1 {
		return fmt.Errorf("pinning the chart: %s has %d lines `  digest: \"\"` (image.digest), want 1", filepath.Join(src, "values.yaml"), n)
	}
	pinned := strings.Replace(string(b), unpinned, "\n  digest: "+digest+"\n", 1)
	return os.WriteFile(values, []byte(pinned), 0o644)
}
