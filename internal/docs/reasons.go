package docs

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"golang.org/x/tools/go/packages"
)

// reason is one of package ipam's Reason constants: why a request was
// refused, what its doc comment says, and the functions that refuse with it.
type reason struct {
	value, doc string
	retryable  bool
	sites      []string // "Exhausted", "claims.Claims.Claim"
}

// reasonsOf reads the Reason constants in their source order with their
// doc comments, which of them Error.Retryable names, and, across the
// module, the functions that refuse with each: a refuse call or an
// Error{Reason: …} literal naming it.
func reasonsOf(s *source, p *packages.Package) ([]reason, error) {
	reasonType := p.Types.Scope().Lookup("Reason")
	if reasonType == nil {
		return nil, fmt.Errorf("package ipam has no type Reason")
	}
	var out []reason
	index := map[types.Object]int{}
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 {
					continue
				}
				c, ok := p.TypesInfo.Defs[vs.Names[0]].(*types.Const)
				if !ok || c.Type() != reasonType.Type() {
					continue
				}
				doc := ""
				if vs.Doc != nil {
					doc, _ = comment(vs.Doc)
					doc = strings.TrimPrefix(doc, c.Name()+": ")
				}
				index[c] = len(out)
				out = append(out, reason{value: constant.StringVal(c.Val()), doc: doc})
			}
		}
	}
	for _, pkg := range s.pkgs {
		for _, f := range pkg.Syntax {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
					refusals(pkg, fn, index, out)
				}
			}
		}
	}
	return out, nil
}

// refusals records fn in out for each reason it refuses with, and marks
// the reasons Error.Retryable names.
func refusals(pkg *packages.Package, fn *ast.FuncDecl, index map[types.Object]int, out []reason) {
	name := fn.Name.Name
	if fn.Recv != nil && len(fn.Recv.List) == 1 {
		recv := types.ExprString(fn.Recv.List[0].Type)
		name = strings.TrimPrefix(recv, "*") + "." + name
	}
	if rel := strings.TrimPrefix(pkg.PkgPath, module+"/"); rel != "ipam" {
		name = pkg.Name + "." + name
	}
	seen := map[int]bool{}
	mark := func(e ast.Expr) {
		if id, ok := ast.Unparen(e).(*ast.SelectorExpr); ok {
			e = id.Sel
		}
		if id, ok := e.(*ast.Ident); ok {
			if i, ok := index[pkg.TypesInfo.Uses[id]]; ok && !seen[i] {
				seen[i] = true
				out[i].sites = append(out[i].sites, "`"+name+"`")
			}
		}
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "refuse" && len(n.Args) > 0 {
				mark(n.Args[0])
			}
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Reason" {
				mark(n.Value)
			}
		}
		return true
	})
	if name == "Error.Retryable" {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if i, ok := index[pkg.TypesInfo.Uses[id]]; ok {
					out[i].retryable = true
				}
			}
			return true
		})
	}
}

// reasonsReference is the generated table of docs/troubleshooting.md.
func reasonsReference(s *source, p *packages.Package) (string, error) {
	rs, err := reasonsOf(s, p)
	if err != nil {
		return "", err
	}
	if len(rs) == 0 {
		return "", fmt.Errorf("package ipam has no Reason constants")
	}
	var b strings.Builder
	b.WriteString("| reason | retried by the client | meaning | refused in |\n| --- | --- | --- | --- |\n")
	for _, r := range rs {
		retry := "no"
		if r.retryable {
			retry = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.value, retry, cell(r.doc), cell(orNone(strings.Join(r.sites, ", "))))
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
