// Package ociimage builds the container image the Helm chart runs: the
// scw-lb-ipam binary for linux/amd64 and linux/arm64 (Options.Arches), one file per image and
// no base image, assembled into an OCI image index whose digest depends only
// on the commit (every timestamp is SOURCE_DATE_EPOCH). It also writes the
// SPDX SBOM of the Go modules in the binaries, pushes the index at release,
// and gives tests the binary an image holds (ExtractBinary).
//
// It must not import any other package of this module: it builds whatever
// binaries it is given.
package ociimage
