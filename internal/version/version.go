package version

import (
	"runtime/debug"
)

// version and revision are set at link time by the image build:
//
//	-X github.com/scw-lb-ipam/scw-lb-ipam/internal/version.version=0.1.0
//	-X github.com/scw-lb-ipam/scw-lb-ipam/internal/version.revision=<commit>
//
// They are variables only because -X can set nothing else; nothing assigns
// them at run time.
var (
	version  string
	revision string
)

// Version is the release version (the chart's appVersion, without a "v"), or,
// when the binary was not stamped, the main module's version as Go recorded it
// (a "go install …@v0.1.0" build), else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Revision is the commit the binary was built from, or, when not stamped,
// the VCS revision go build recorded (absent with -buildvcs=false), else "".
func Revision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// String is the one line "scw-lb-ipam version" prints and the logs carry:
// version, revision (when known) and the Go toolchain.
func String() string {
	s := Version()
	if r := Revision(); r != "" {
		s += " (revision " + r + ")"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		s += " " + bi.GoVersion
	}
	return s
}
