package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The limits on what a reader must hold at once, for code that is not a
// test and for ipam's tests: a function fits a screen, a file is read in
// one sitting, a type is one concern (its method set, counted by
// TestMethodSets).
const (
	maxFuncLines = 60
	maxFileLines = 400
	maxMethods   = 20
)

// oversize are known exceptions, keyed file:func; there are
// none. Each must still break its limit, so that the list only shrinks.
var oversize = map[string]bool{}

// TestSizeLimits fails on each function over maxFuncLines lines and file
// over maxFileLines lines, in code that is not a test and in the tests
// under ipam/.
// ipam's tests are checked too because they are read as its rules' specification.
func TestSizeLimits(t *testing.T) {
	root := moduleRoot(t)
	excepted := map[string]bool{}
	over := func(key, problem string) {
		if oversize[key] {
			excepted[key] = true
			return
		}
		t.Error(problem)
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if !sizeChecked(filepath.ToSlash(rel)) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s: %d lines, more than %d", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn.Body != nil {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					over(filepath.ToSlash(rel)+":"+fn.Name.Name, fmt.Sprintf("%s:%d: func %s is %d lines, more than %d", rel, fset.Position(fn.Pos()).Line, fn.Name.Name, n, maxFuncLines))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range oversize {
		if !excepted[key] {
			t.Errorf("%s is within its limit now: remove it from oversize", key)
		}
	}
}

// sizeChecked reports whether the Go file at rel, slash-separated from the
// module root, is held to the size limits: code that is not a test, and the
// tests under ipam/.
func sizeChecked(rel string) bool {
	if !strings.HasSuffix(rel, ".go") {
		return false
	}
	return !strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "ipam/")
}

// TestSizeChecked pins which files the limits cover, so that a change to
// sizeChecked cannot quietly drop ipam's tests or start checking others.
func TestSizeChecked(t *testing.T) {
	for rel, want := range map[string]bool{
		"ipam/pool.go":                   true,
		"ipam/pool_rules_test.go":        true,
		"test/emulator/ipam_test.go":     false,
		"internal/archtest/size_test.go": false,
		"cmd/scw-lb-ipam/main_test.go":   false,
		"cmd/scw-lb-ipam/main.go":        true,
		"ipamx/a_test.go":                false,
		"ipam/doc.md":                    false,
	} {
		if got := sizeChecked(rel); got != want {
			t.Errorf("sizeChecked(%q) = %v, want %v", rel, got, want)
		}
	}
}

// moduleRoot is the directory of go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
