package docs

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

const prometheusPkg = "github.com/prometheus/client_golang/prometheus"

// metric is one collector the code creates, as its constructor's
// arguments say: the generator reads the calls rather than run them, so
// that the page needs no running process and names where each is made.
type metric struct {
	name, kind, help string
	labels           []string
	where            string // package, relative to the module
}

// constructors are the prometheus functions that make a metric, and the
// type each makes; NewDesc's type is the value type its const metrics are
// made with.
var constructors = map[string]string{
	"NewCounter": "counter", "NewCounterVec": "counter", "NewGauge": "gauge", "NewGaugeVec": "gauge",
	"NewHistogram": "histogram", "NewHistogramVec": "histogram", "NewSummary": "summary", "NewSummaryVec": "summary",
	"NewDesc": "",
}

// prometheusFunc is the name of the prometheus function call calls, "" when
// it calls something else.
func prometheusFunc(p *packages.Package, call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	fn, ok := p.TypesInfo.ObjectOf(sel.Sel).(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != prometheusPkg {
		return ""
	}
	return fn.Name()
}

func metricsOf(s *source) ([]metric, error) {
	var out []metric
	var errs []string
	for _, p := range s.pkgs {
		where := strings.TrimPrefix(strings.TrimPrefix(p.PkgPath, module), "/")
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				kind, ok := constructors[prometheusFunc(p, call)]
				if !ok {
					return true
				}
				m, err := readMetric(p, f, call, kind)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", p.Fset.Position(call.Pos()), err))
					return true
				}
				m.where = where
				out = append(out, m)
				return true
			})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("metrics the generator cannot read (names, help and labels must be constants):\n  %s", strings.Join(errs, "\n  "))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func readMetric(p *packages.Package, file *ast.File, call *ast.CallExpr, kind string) (metric, error) {
	var m metric
	var err error
	if kind == "" { // NewDesc(name, help, labels, constLabels)
		if len(call.Args) < 3 {
			return m, fmt.Errorf("NewDesc with %d arguments", len(call.Args))
		}
		if m.name, err = constString(p, call.Args[0]); err != nil {
			return m, err
		}
		if m.help, err = constString(p, call.Args[1]); err != nil {
			return m, err
		}
		m.labels, err = constStrings(p, call.Args[2])
		m.kind = descKind(p, file, call)
		return m, err
	}
	opts, ok := call.Args[0].(*ast.CompositeLit)
	if !ok {
		return m, fmt.Errorf("the Opts of %s are not a composite literal", m.name)
	}
	parts := map[string]string{}
	for _, e := range opts.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key := kv.Key.(*ast.Ident).Name
		if key == "Name" || key == "Help" || key == "Namespace" || key == "Subsystem" {
			if parts[key], err = constString(p, kv.Value); err != nil {
				return m, err
			}
		}
	}
	m.name = strings.Join(nonEmpty(parts["Namespace"], parts["Subsystem"], parts["Name"]), "_")
	m.help, m.kind = parts["Help"], kind
	if len(call.Args) > 1 {
		m.labels, err = constStrings(p, call.Args[1])
	}
	return m, err
}

// descKind is the type of a Desc's metrics: the ValueType argument of the
// MustNewConstMetric calls that use the field or variable it is assigned to.
func descKind(p *packages.Package, file *ast.File, desc *ast.CallExpr) string {
	var target types.Object
	ast.Inspect(file, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok && kv.Value == desc {
			if id, ok := kv.Key.(*ast.Ident); ok {
				target = p.TypesInfo.ObjectOf(id)
			}
		}
		return target == nil
	})
	kind := "untyped"
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || target == nil || len(call.Args) < 2 {
			return true
		}
		switch prometheusFunc(p, call) {
		case "MustNewConstMetric", "NewConstMetric":
		default:
			return true
		}
		if sel, ok := call.Args[0].(*ast.SelectorExpr); ok && p.TypesInfo.ObjectOf(sel.Sel) == target {
			if vt, ok := call.Args[1].(*ast.SelectorExpr); ok {
				kind = strings.ToLower(strings.TrimSuffix(vt.Sel.Name, "Value"))
			}
		}
		return true
	})
	return kind
}

func constString(p *packages.Package, e ast.Expr) (string, error) {
	tv, ok := p.TypesInfo.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", fmt.Errorf("%s is not a constant string", types.ExprString(e))
	}
	return constant.StringVal(tv.Value), nil
}

func constStrings(p *packages.Package, e ast.Expr) ([]string, error) {
	if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
		return nil, nil
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("the labels %s are not a []string literal", types.ExprString(e))
	}
	var out []string
	for _, el := range lit.Elts {
		s, err := constString(p, el)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// metricsReference is the generated table of docs/metrics.md.
func metricsReference(s *source) (string, error) {
	ms, err := metricsOf(s)
	if err != nil {
		return "", err
	}
	if len(ms) == 0 {
		return "", fmt.Errorf("no metric found in the module")
	}
	var b strings.Builder
	b.WriteString("| metric | type | labels | help | made in |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range ms {
		labels := "—"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` |\n", m.name, m.kind, labels, cell(m.help), m.where)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
