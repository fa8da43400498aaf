package ociimage

import (
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// The SPDX document is written by hand: it is a list of Go modules and one
// relationship each, and the SPDX libraries (spdx/tools-golang) would bring
// their own dependency tree into the main module for ~100 lines of JSON.

type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string            `json:"name"`
	SPDXID                string            `json:"SPDXID"`
	VersionInfo           string            `json:"versionInfo"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	LicenseDeclared       string            `json:"licenseDeclared,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// WriteSBOM writes the SPDX 2.3 JSON document of the Go modules linked into
// bins (their union: the platforms share one build list), as Go recorded them
// in each binary. The main module carries o.Version; imageDigest makes the
// document's namespace unique without a random or a clock.
func WriteSBOM(path string, o Options, imageDigest string, bins map[string]string) error {
	main, goVersion, deps, err := linkedModules(bins)
	if err != nil {
		return err
	}
	ids := spdxIDs{}
	root := spdxPackage{
		Name:                  main.Path,
		SPDXID:                ids.next("Package-" + main.Path),
		VersionInfo:           "v" + o.Version,
		DownloadLocation:      o.Source,
		LicenseDeclared:       License,
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs:          []spdxExternalRef{purl(main.Path, "v"+o.Version)},
	}
	if root.DownloadLocation == "" {
		root.DownloadLocation = "NOASSERTION"
	}
	stdlib := spdxPackage{
		Name:                  "stdlib",
		SPDXID:                ids.next("Package-stdlib"),
		VersionInfo:           goVersion,
		DownloadLocation:      "https://go.dev/dl/",
		LicenseDeclared:       "BSD-3-Clause",
		PrimaryPackagePurpose: "LIBRARY",
		// Vulnerability scanners (grype, osv) look the toolchain up so.
		ExternalRefs: []spdxExternalRef{purl("stdlib", strings.TrimPrefix(goVersion, "go"))},
	}
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              BinaryName + "-" + o.Version,
		DocumentNamespace: fmt.Sprintf("https://spdx.org/spdxdocs/%s-%s-%s", BinaryName, o.Version, strings.TrimPrefix(imageDigest, "sha256:")),
		CreationInfo: spdxCreationInfo{
			Created:  o.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: scw-image"},
		},
		Packages: []spdxPackage{root, stdlib},
		Relationships: []spdxRelationship{
			{"SPDXRef-DOCUMENT", "DESCRIBES", root.SPDXID},
			{root.SPDXID, "DEPENDS_ON", stdlib.SPDXID},
		},
	}
	keys := make([]string, 0, len(deps))
	for k := range deps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := modulePackage(deps[k], ids)
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{root.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// linkedModules are the main module, the toolchain and the union of the
// modules (after replacements) Go recorded in each of bins.
func linkedModules(bins map[string]string) (main debug.Module, goVersion string, deps map[string]debug.Module, err error) {
	deps = map[string]debug.Module{}
	for arch := range bins {
		bi, err := buildinfo.ReadFile(bins[arch])
		if err != nil {
			return main, "", nil, fmt.Errorf("linux/%s binary: %w", arch, err)
		}
		main, goVersion = bi.Main, bi.GoVersion
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			deps[d.Path+"@"+d.Version] = *d
		}
	}
	return main, goVersion, deps, nil
}

// modulePackage is the SPDX package of a linked module.
func modulePackage(d debug.Module, ids spdxIDs) spdxPackage {
	p := spdxPackage{
		Name:                  d.Path,
		SPDXID:                ids.next("Package-" + d.Path + "-" + d.Version),
		VersionInfo:           d.Version,
		DownloadLocation:      "NOASSERTION",
		PrimaryPackagePurpose: "LIBRARY",
	}
	if d.Version != "" { // a replacement by a directory has none
		p.DownloadLocation = "https://proxy.golang.org/" + escapeModulePath(d.Path) + "/@v/" + escapeModulePath(d.Version) + ".zip"
		p.ExternalRefs = []spdxExternalRef{purl(d.Path, d.Version)}
	}
	// The h1: hash is the base64 SHA-256 of the module's file list
	// (go.sum's); SPDX wants hex. Scanners (syft) record it the same way.
	if sum, ok := strings.CutPrefix(d.Sum, "h1:"); ok {
		if b, err := base64.StdEncoding.DecodeString(sum); err == nil {
			p.Checksums = []spdxChecksum{{"SHA256", hex.EncodeToString(b)}}
		}
	}
	return p
}

// purl is the package URL of a Go module: pkg:golang/PATH@VERSION, each
// part percent-encoded ("+incompatible" becomes "%2Bincompatible").
func purl(path, version string) spdxExternalRef {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	return spdxExternalRef{
		ReferenceCategory: "PACKAGE-MANAGER",
		ReferenceType:     "purl",
		ReferenceLocator:  "pkg:golang/" + strings.Join(segs, "/") + "@" + purlEscape(version),
	}
}

func purlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// escapeModulePath is the module proxy's case encoding: an upper-case
// letter becomes "!" and its lower case (github.com/!azure/…).
func escapeModulePath(s string) string {
	var b strings.Builder
	for _, c := range s {
		if 'A' <= c && c <= 'Z' {
			b.WriteByte('!')
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

var spdxIDInvalid = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxIDs hands out SPDXRef- identifiers, unique even where two names differ
// only in the characters SPDX forbids.
type spdxIDs map[string]bool

func (ids spdxIDs) next(name string) string {
	id := "SPDXRef-" + spdxIDInvalid.ReplaceAllString(name, "-")
	for i, base := 2, id; ids[id]; i++ {
		id = fmt.Sprintf("%s-%d", base, i)
	}
	ids[id] = true
	return id
}
