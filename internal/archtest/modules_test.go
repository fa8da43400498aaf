package archtest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestHelmSharesTheModuleVersions: every module that test/tools/helm and
// the main module both require is at one version in both. A package
// compiles once for the two builds only when it and everything below it
// are the same versions; one differing module low in the graph (x/net,
// apimachinery) makes make test compile helm's whole graph a second time.
func TestHelmSharesTheModuleVersions(t *testing.T) {
	root := moduleRoot(t)
	main := requirements(t, filepath.Join(root, "go.mod"))
	helm := requirements(t, filepath.Join(root, "test", "tools", "helm", "go.mod"))
	shared := 0
	for path, v := range helm {
		mv, ok := main[path]
		if !ok {
			continue
		}
		shared++
		if mv != v {
			t.Errorf("%s is %s in go.mod and %s in test/tools/helm/go.mod: go get %s@<the higher> where it is lower, then go mod tidy",
				path, mv, v, path)
		}
	}
	if shared < 20 {
		t.Fatalf("the two go.mod files share %d modules: reading them no longer works", shared)
	}
}

// requirements are the module versions a go.mod requires, by path.
func requirements(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]string{}
	for _, r := range f.Require {
		req[r.Mod.Path] = r.Mod.Version
	}
	return req
}
