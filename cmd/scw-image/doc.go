// Command scw-image builds the scw-lb-ipam container image without Docker
// ("make image"): static binaries for linux/amd64 and linux/arm64 (-arches: the
// tests build amd64, the release both), one OCI
// image index with SOURCE_DATE_EPOCH as its only clock, a docker tarball and
// an SPDX SBOM. At release, "push" sends the index to a registry once the git
// tag and the chart agree with the image's version.
//
// It is a thin command over internal/ociimage and imports nothing else of
// the module.
package main
