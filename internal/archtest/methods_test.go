package archtest

import (
	"fmt"
	"go/types"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// TestMethodSets fails on a type of the product whose method set, as
// go/types computes it (on the pointer, with the methods promoted from
// embedded types), holds more than maxMethods methods: a type is one
// concern, however its methods came to it. The exported ones are listed.
func TestMethodSets(t *testing.T) {
	checked := 0
	var over []string
	for name, p := range shipped(t, packages.NeedName|packages.NeedTypes) {
		scope := p.Types.Scope()
		for _, n := range scope.Names() {
			tn, ok := scope.Lookup(n).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			checked++
			if all, exported := methods(tn.Type()); all > maxMethods {
				over = append(over, fmt.Sprintf("%s.%s has %d methods (exported: %s)", name, n, all, strings.Join(exported, ", ")))
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d types: the check would pass on nothing", checked)
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("type %s, more than %d", o, maxMethods)
	}
}

// shipped loads the module's packages with mode and returns those that ship
// (see ships), by their path in the module; a package that does not load
// fails the test.
func shipped(t *testing.T, mode packages.LoadMode) map[string]*packages.Package {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{Dir: moduleRoot(t), Mode: mode}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*packages.Package{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		if name, _ := rel(p.PkgPath); ships(name) {
			out[name] = p
		}
	}
	return out
}

// ships reports whether the package at rel is part of the product: neither
// a test, a check, nor a command or library that only builds or documents it.
func ships(rel string) bool {
	switch {
	case strings.HasPrefix(rel, testOnly), strings.HasPrefix(rel, "cmd/"), rel == "internal/archtest", rel == "internal/docs", rel == "internal/ociimage":
		return false
	}
	return true
}

// methods counts the methods of *T (of T for an interface), and names the
// exported ones.
func methods(typ types.Type) (all int, exported []string) {
	if !types.IsInterface(typ) {
		typ = types.NewPointer(typ)
	}
	ms := types.NewMethodSet(typ)
	for i := range ms.Len() {
		if f := ms.At(i).Obj(); f.Exported() {
			exported = append(exported, f.Name())
		}
	}
	return ms.Len(), exported
}
