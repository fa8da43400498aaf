package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// ExtractBinary writes the /scw-lb-ipam of the image for this machine's
// platform (runtime.GOOS/GOARCH) in the OCI layout layoutDir (bin/image/oci)
// to the directory dst, created if missing, and returns the file's path. A
// test runs what the image would, not what go build gives it.
func ExtractBinary(layoutDir, dst string) (string, error) {
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return "", err
	}
	want := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	img, err := findImage(idx, want)
	if err != nil {
		return "", fmt.Errorf("%s: %w", layoutDir, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dst, BinaryName)
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: the %s/%s image has no /%s", layoutDir, want.OS, want.Architecture, BinaryName)
		}
		if err != nil {
			return "", err
		}
		if h.Typeflag != tar.TypeReg || path.Clean("/"+h.Name) != "/"+BinaryName {
			continue
		}
		if err := writeExecutable(out, tr); err != nil {
			return "", err
		}
		return out, nil
	}
}

// findImage is the image for want in idx or in the indexes it holds (the
// layout's index.json points at the image index).
func findImage(idx v1.ImageIndex, want v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := findImage(child, want); err == nil {
				return img, nil
			}
		case d.MediaType.IsImage() && d.Platform != nil &&
			d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture:
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s", want.OS, want.Architecture)
}

// writeExecutable writes r to path, mode 0755, replacing any file there
// only once it is complete.
func writeExecutable(path string, r io.Reader) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	// The umask may have taken bits off at creation.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
