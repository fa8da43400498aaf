package archtest

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// oneWay are the packages whose files call each other in one direction
// only: a reader who follows a call into another file never has to come
// back to a file already left to read what it calls.
var oneWay = []string{"ipam", "ipam/inventory", "ipam/allocator"}

// TestNoFilePairCallsBothWays fails when two non-test files of a package
// in oneWay call each other's functions or methods (calls resolved by the
// type checker: through an interface they name no file).
func TestNoFilePairCallsBothWays(t *testing.T) {
	patterns := make([]string, len(oneWay))
	for i, dir := range oneWay {
		patterns[i] = "./" + dir
	}
	cfg := &packages.Config{Dir: moduleRoot(t), Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		calls := fileCalls(p)
		var both []string
		for from, tos := range calls {
			for to, fns := range tos {
				if back := calls[to][from]; from < to && back != nil {
					both = append(both, fmt.Sprintf("%s calls %s's %s, and %s calls %s's %s", from, to, names(fns), to, from, names(back)))
				}
			}
		}
		sort.Strings(both)
		for _, pair := range both {
			t.Errorf("%s: %s: move what one needs of the other beside it, or below it", p.PkgPath, pair)
		}
	}
}

func names(fns map[string]bool) string {
	out := make([]string, 0, len(fns))
	for n := range fns {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// fileCalls maps each file of p to the files of p whose functions it calls,
// and those functions' names.
func fileCalls(p *packages.Package) map[string]map[string]map[string]bool {
	calls := map[string]map[string]map[string]bool{}
	for _, f := range p.Syntax {
		from := filepath.Base(p.Fset.Position(f.Package).Filename)
		calls[from] = map[string]map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch fn := ast.Unparen(call.Fun).(type) {
			case *ast.Ident:
				id = fn
			case *ast.SelectorExpr:
				id = fn.Sel
			case *ast.IndexExpr:
				id, _ = fn.X.(*ast.Ident)
			}
			if id == nil {
				return true
			}
			callee, ok := p.TypesInfo.Uses[id].(*types.Func)
			if !ok || callee.Pkg() != p.Types {
				return true
			}
			to := filepath.Base(p.Fset.Position(callee.Pos()).Filename)
			if to == from {
				return true
			}
			if calls[from][to] == nil {
				calls[from][to] = map[string]bool{}
			}
			calls[from][to][callee.Name()] = true
			return true
		})
	}
	return calls
}
