package docs

import (
	"fmt"
	"go/ast"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

const module = "github.com/scw-lb-ipam/scw-lb-ipam"

// source is the module's packages, parsed and type-checked (tests left
// out): the one place the generator reads the code from.
type source struct {
	pkgs []*packages.Package // sorted by import path
}

func load(root string) (*source, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  root,
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, fmt.Errorf("reading the module's packages: %w", err)
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("the module does not build, so its docs cannot be written:\n  %s", strings.Join(errs, "\n  "))
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].PkgPath < pkgs[j].PkgPath })
	return &source{pkgs: pkgs}, nil
}

// pkg is the module's package at rel ("ipam").
func (s *source) pkg(rel string) (*packages.Package, error) {
	for _, p := range s.pkgs {
		if p.PkgPath == module+"/"+rel {
			return p, nil
		}
	}
	return nil, fmt.Errorf("package %s not found in the module", rel)
}

// typeSpec finds the declaration of a type and its doc comment.
func typeSpec(p *packages.Package, name string) (*ast.TypeSpec, *ast.CommentGroup, error) {
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == name {
					doc := ts.Doc
					if doc == nil {
						doc = g.Doc
					}
					return ts, doc, nil
				}
			}
		}
	}
	return nil, nil, fmt.Errorf("type %s not found in package %s", name, p.PkgPath)
}

// comment splits a doc comment into its prose, joined into one paragraph
// per blank line, and its marker lines ("+name: value" or "+name").
func comment(g *ast.CommentGroup) (prose string, markers map[string]string) {
	markers = map[string]string{}
	var lines []string
	for _, line := range strings.Split(g.Text(), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "+"); ok {
			k, v, _ := strings.Cut(m, ":")
			markers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			continue
		}
		lines = append(lines, line)
	}
	return strings.TrimSpace(strings.Join(strings.Fields(strings.Join(lines, " ")), " ")), markers
}
