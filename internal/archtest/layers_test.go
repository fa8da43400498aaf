package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/scw-lb-ipam/scw-lb-ipam"

// layer is one row of the diagram in docs/architecture.md.
type layer struct {
	name string
	pkgs []string // relative to the module
}

// layers is the import graph's order, top to bottom: a package imports only
// packages of the layers below its own, never one of its own layer or above.
// docs/architecture.md shows this table (TestDocsShowTheLayers).
var layers = []layer{
	{"commands", []string{"cmd/scw-lb-ipam", "cmd/scw-playground", "cmd/scw-emulator", "cmd/scw-image", "cmd/scw-docs"}},
	{"suites and checks", []string{"test/integration", "test/clients", "test/dns", "test/gateway", "test/chart", "test/chaos", "test/bench", "test/e2e", "test/interleavings", "internal/archtest", "internal/docs"}},
	{"make run", []string{"test/playground"}},
	{"test environment", []string{"test/testenv"}},
	{"test fixtures", []string{"test/fixtures"}},
	{"local runs", []string{"test/localrun", "test/ccmprocess"}},
	{"wiring", []string{"internal/app"}},
	{"admission, release, TLS", []string{"webhook", "sweeper", "certs"}},
	{"allocator", []string{"ipam/allocator"}},
	{"inventory", []string{"ipam/inventory"}},
	{"requests, claims, view", []string{"request", "ipam/claims", "view"}},
	{"Service cache", []string{"servicecache"}},
	{"neighbours' words", []string{"neighbours"}},
	{"CCM contract, rules", []string{"ccm", "ipam"}},
	{"Scaleway, addresses", []string{"ipam/scaleway", "ipam/addrspace"}},
	{"beside", []string{"test/emulator", "test/oldccm", "internal/version", "internal/ociimage"}},
}

// selfContained import no package of the module: the CCM contract is pure
// knowledge of the Service object, the Scaleway view sits under the
// allocator, and the emulator and the v0.35 CCM fake check the project from
// the outside rather than share its reading of the API and annotations.
var selfContained = []string{"ccm", "ipam/scaleway", "ipam/addrspace", "test/emulator", "test/oldccm", "internal/version", "internal/ociimage"}

// sdkAPI may import scaleway-sdk-go's api packages: the adapter, the
// emulator and the v0.35 CCM fake. sdkCore may also import its scw package,
// to point a client at the emulator.
var (
	sdkAPI  = []string{"ipam/scaleway", "test/emulator", "test/oldccm"}
	sdkCore = append([]string{"internal/app", "test/testenv", "test/playground"}, sdkAPI...)
)

// testOnly is where what does not ship lives: every package under it is
// linked into no binary that ships, and imported by no package that does.
const testOnly = "test/"

// envtest is controller-runtime's test control plane, which no binary that
// ships may link either.
const envtest = "sigs.k8s.io/controller-runtime/pkg/envtest"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs go list over the module, from its root.
func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Deps"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel names a package of the module relative to it; ok is false for others.
func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func layerOf() map[string]int {
	m := map[string]int{}
	for i, l := range layers {
		for _, p := range l.pkgs {
			m[p] = i
		}
	}
	return m
}

// TestImportLayers fails on an import of a package of the same layer or of
// a layer above, and on a package the table does not place.
func TestImportLayers(t *testing.T) {
	at := layerOf()
	for _, p := range list(t, "./...") {
		from, _ := rel(p.ImportPath)
		li, placed := at[from]
		if !placed {
			t.Errorf("package %s is in no layer: add it to layers in internal/archtest and to the diagram in docs/architecture.md", from)
			continue
		}
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if !ours {
				continue
			}
			lj, placed := at[to]
			switch {
			case !placed:
				// reported above, as a package of its own
			case lj == li:
				t.Errorf("%s imports %s, of its own layer (%s): a layer's packages do not know each other; move what they share below", from, to, layers[li].name)
			case lj < li:
				t.Errorf("%s (layer %d, %s) imports %s (layer %d, %s), above it: a lower layer must not reach up", from, li+1, layers[li].name, to, lj+1, layers[lj].name)
			}
		}
	}
}

// TestSelfContained: the packages that import nothing of the project.
func TestSelfContained(t *testing.T) {
	for _, p := range list(t, "./...") {
		from, _ := rel(p.ImportPath)
		if !slices.Contains(selfContained, from) {
			continue
		}
		for _, imp := range p.Imports {
			if to, ours := rel(imp); ours {
				t.Errorf("%s imports %s: it must import no package of the project", from, to)
			}
		}
	}
}

// TestScalewaySDKConfined: scaleway-sdk-go's API packages are the adapter's,
// the emulator's and the v0.35 CCM fake's business only; nothing above the
// adapter sees an SDK type.
func TestScalewaySDKConfined(t *testing.T) {
	const sdk = "github.com/scaleway/scaleway-sdk-go/"
	for _, p := range list(t, "./...") {
		from, _ := rel(p.ImportPath)
		for _, imp := range p.Imports {
			switch {
			case strings.HasPrefix(imp, sdk+"api/") && !slices.Contains(sdkAPI, from):
				t.Errorf("%s imports %s: only %s may import the SDK's API packages", from, imp, strings.Join(sdkAPI, ", "))
			case strings.HasPrefix(imp, sdk) && !slices.Contains(sdkCore, from):
				t.Errorf("%s imports %s: only %s may import scaleway-sdk-go", from, imp, strings.Join(sdkCore, ", "))
			}
		}
	}
}

// TestShippedBinaryLinksNoTestCode: scw-lb-ipam, which the image ships,
// links nothing under test/ (the emulator, the test environment, the CCM
// launcher and fake, the fixtures, the playground) and not envtest.
func TestShippedBinaryLinksNoTestCode(t *testing.T) {
	deps := list(t, "-deps", "./cmd/scw-lb-ipam")
	if len(deps) < 10 {
		t.Fatalf("go list -deps ./cmd/scw-lb-ipam listed %d packages: the check would pass on nothing", len(deps))
	}
	for _, p := range deps {
		if name, ours := rel(p.ImportPath); (ours && strings.HasPrefix(name, testOnly)) || p.ImportPath == envtest {
			t.Errorf("cmd/scw-lb-ipam links %s", p.ImportPath)
		}
	}
}

// TestOnlyTestsImportTestPackages: what ships never imports what lives under
// test/. Only test/ itself, the commands that do not ship (make run's
// scw-playground and scw-emulator) and the checks import it.
func TestOnlyTestsImportTestPackages(t *testing.T) {
	for _, p := range list(t, "./...") {
		from, _ := rel(p.ImportPath)
		if mayImportTests(from) {
			continue
		}
		for _, imp := range p.Imports {
			if to, ours := rel(imp); ours && strings.HasPrefix(to, testOnly) {
				t.Errorf("%s imports %s: what ships may not import what lives under test/", from, to)
			}
		}
	}
}

// mayImportTests reports whether the package at rel may import test/.
func mayImportTests(rel string) bool {
	return strings.HasPrefix(rel, testOnly) || rel == "cmd/scw-playground" || rel == "cmd/scw-emulator" || rel == "internal/archtest"
}

// diagram is the layer table as docs/architecture.md shows it.
func diagram() string {
	var b strings.Builder
	for i, l := range layers {
		fmt.Fprintf(&b, "%d  %-24s %s\n", i+1, l.name, strings.Join(l.pkgs, "  "))
	}
	return b.String()
}

// TestDocsShowTheLayers: the Layers section of docs/architecture.md holds
// the table above, verbatim, so that the diagram and this test cannot drift.
func TestDocsShowTheLayers(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, arch, ok := strings.Cut(string(doc), "\n## Layers\n")
	if !ok {
		t.Fatal("docs/architecture.md has no ## Layers section")
	}
	arch, _, _ = strings.Cut(arch, "\n## ")
	if want := diagram(); !strings.Contains(arch, want) {
		t.Fatalf("the Layers section of docs/architecture.md does not show the layers as internal/archtest has them; it should contain:\n%s", want)
	}
}
