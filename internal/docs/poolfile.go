package docs

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"reflect"
	"strings"
	"unicode"

	"golang.org/x/tools/go/packages"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway"
)

// field is one key of the pool file, read from its Go struct field.
type field struct {
	name     string // the JSON (and YAML) key
	doc      string // the doc comment, without its markers
	required bool
	schema   *object
	kind     string // what the reference page calls its type
}

// poolStruct reads the fields of an ipam struct type, in order.
func poolStruct(p *packages.Package, name string) ([]field, error) {
	ts, _, err := typeSpec(p, name)
	if err != nil {
		return nil, err
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("ipam.%s is not a struct", name)
	}
	var out []field
	for _, f := range st.Fields.List {
		if len(f.Names) != 1 || !f.Names[0].IsExported() || f.Tag == nil {
			continue
		}
		tag, _ := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Lookup("json")
		key, _, _ := strings.Cut(tag, ",")
		goName := f.Names[0].Name
		if key == "" || key == "-" {
			continue
		}
		if f.Doc == nil {
			return nil, fmt.Errorf("ipam.%s.%s (%s in the pool file) has no doc comment: write one, it is the field's description in docs/pool-file.md and values.schema.json", name, goName, key)
		}
		prose, markers := comment(f.Doc)
		if rest, ok := strings.CutPrefix(prose, goName+" "); ok {
			prose = "`" + key + "` " + rest
		}
		fd := field{name: key, doc: prose}
		if fd.schema, fd.kind, err = schemaOf(p, p.TypesInfo.TypeOf(f.Type)); err != nil {
			return nil, fmt.Errorf("ipam.%s.%s: %w", name, goName, err)
		}
		if err := applyMarkers(&fd, markers); err != nil {
			return nil, fmt.Errorf("ipam.%s.%s: %w", name, goName, err)
		}
		out = append(out, fd)
	}
	return out, nil
}

// applyMarkers adds a field's "+schema: {…}" keywords to the schema its Go
// type gave (a $ref, anyOf or enum replaces the type), "+required", and
// "+enum: scaleway.Regions()".
func applyMarkers(fd *field, markers map[string]string) error {
	for k, v := range markers {
		switch k {
		case "required":
			fd.required = true
		case "enum":
			if v != "scaleway.Regions()" {
				return fmt.Errorf("+enum: %q: the only enum source is scaleway.Regions()", v)
			}
			list := []any{}
			for _, r := range scaleway.Regions() {
				list = append(list, r)
			}
			fd.schema = newObject()
			fd.schema.set("enum", list)
			fd.kind = "one of " + joinQuoted(scaleway.Regions())
		case "schema":
			extra, err := parseJSON([]byte(v))
			if err != nil {
				return fmt.Errorf("+schema: %s: %w", v, err)
			}
			o, ok := extra.(*object)
			if !ok {
				return fmt.Errorf("+schema: %s is not a JSON object", v)
			}
			for _, key := range o.keys {
				if key == "$ref" || key == "anyOf" || key == "enum" {
					// The marker says what the field takes in place of its
					// Go type's schema, which would also have to hold.
					fd.schema.del("type")
					fd.schema.del("$ref")
				}
				fd.schema.set(key, o.values[key])
			}
			fd.kind = kindOf(fd.schema, fd.kind)
		default:
			return fmt.Errorf("unknown marker +%s: use +schema: {…}, +required or +enum: scaleway.Regions()", k)
		}
	}
	return nil
}

// kindOf names a marked schema's type for the reference page.
func kindOf(s *object, kind string) string {
	if s.values["$ref"] == "#/definitions/uuid" {
		return "UUID"
	}
	if alt, ok := s.values["anyOf"].([]any); ok && len(alt) == 2 {
		// The alternatives' first says what the field is, the second what
		// else it takes: "" beside a UUID, 0 beside a duration.
		if first, ok := alt[0].(*object); ok && first.values["$ref"] == "#/definitions/duration" {
			return "duration, or 0"
		}
		return "UUID, or empty"
	}
	return kind
}

// schemaOf is the JSON Schema of a Go type of the pool file, and its name
// on the reference page.
func schemaOf(p *packages.Package, t types.Type) (*object, string, error) {
	s := newObject()
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	if named, ok := t.(*types.Named); ok && named.Obj().Pkg() == p.Types {
		return namedSchema(p, named)
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsString != 0:
			s.set("type", "string")
			return s, "string", nil
		case u.Info()&types.IsBoolean != 0:
			s.set("type", "boolean")
			return s, "boolean", nil
		case u.Info()&types.IsInteger != 0:
			s.set("type", "integer")
			return s, "integer", nil
		}
	case *types.Slice:
		items, kind, err := schemaOf(p, u.Elem())
		if err != nil {
			return nil, "", err
		}
		s.set("type", "array")
		s.set("items", items)
		return s, "list of " + plural(kind), nil
	}
	return nil, "", fmt.Errorf("no JSON Schema for the Go type %s: teach internal/docs, or use a string, bool, int or slice", t)
}

// namedSchema: a struct type of ipam is a definition of its own; a string
// type with constants is their enum.
func namedSchema(p *packages.Package, named *types.Named) (*object, string, error) {
	s := newObject()
	name := named.Obj().Name()
	if _, ok := named.Underlying().(*types.Struct); ok {
		s.set("$ref", "#/definitions/"+lowerFirst(name))
		return s, words(name), nil
	}
	var values []any
	var words []string
	scope := p.Types.Scope()
	for _, n := range scope.Names() {
		if c, ok := scope.Lookup(n).(*types.Const); ok && types.Identical(c.Type(), named) && c.Val().Kind() == constant.String {
			values = append(values, constant.StringVal(c.Val()))
			words = append(words, constant.StringVal(c.Val()))
		}
	}
	if len(values) == 0 {
		return nil, "", fmt.Errorf("ipam.%s has no constants to make an enum of", name)
	}
	s.set("enum", values)
	return s, strings.Join(words, " or "), nil
}

// definition is the schema of an ipam type: its own "+schema: {…}" doc
// marker (Duration), else its fields (Pool, Config).
func definition(p *packages.Package, name string) (*object, error) {
	ts, doc, err := typeSpec(p, name)
	if err != nil {
		return nil, err
	}
	if doc != nil {
		if _, markers := comment(doc); markers["schema"] != "" {
			o, err := parseJSON([]byte(markers["schema"]))
			if err != nil {
				return nil, fmt.Errorf("ipam.%s: +schema: %w", name, err)
			}
			return o.(*object), nil
		}
	}
	if _, ok := ts.Type.(*ast.StructType); !ok {
		return nil, fmt.Errorf("ipam.%s is no struct and has no +schema: {…} line in its doc comment", name)
	}
	fields, err := poolStruct(p, name)
	if err != nil {
		return nil, err
	}
	return structSchema(fields), nil
}

func structSchema(fields []field) *object {
	s := newObject()
	s.set("type", "object")
	s.set("additionalProperties", false)
	var required []any
	props := newObject()
	for _, f := range fields {
		if f.required {
			required = append(required, f.name)
		}
		props.set(f.name, f.schema)
	}
	if required != nil {
		s.set("required", required)
	}
	s.set("properties", props)
	return s
}

// poolSchema rewrites the pool file's part of the chart's schema: the
// definitions duration and pool, and the properties of config; the rest of
// the file is left as written.
func poolSchema(p *packages.Package, current []byte) ([]byte, error) {
	parts := []struct {
		path []string
		typ  string
	}{
		{[]string{"definitions", "duration"}, "Duration"},
		{[]string{"definitions", "pool"}, "Pool"},
		{[]string{"definitions", "gatewayController"}, "GatewayController"},
		{[]string{"properties", "config"}, "Config"},
	}
	out := current
	for _, part := range parts {
		o, err := definition(p, part.typ)
		if err != nil {
			return nil, err
		}
		if out, err = spliceJSON(out, part.path, o); err != nil {
			return nil, fmt.Errorf("%s: %w", schemaFile, err)
		}
	}
	if _, err := parseJSON(out); err != nil {
		return nil, fmt.Errorf("%s as rewritten: %w", schemaFile, err)
	}
	return out, nil
}

// poolReference is the generated part of docs/pool-file.md: a table per
// struct, each field's description its doc comment.
func poolReference(p *packages.Package) (string, error) {
	var b strings.Builder
	for _, t := range []struct{ name, title string }{{"Config", "The file"}, {"Pool", "A pool (`pools[]`)"}, {"GatewayController", "A Gateway controller (`gatewayControllers[]`)"}} {
		fields, err := poolStruct(p, t.name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "### %s\n\n| field | type | description |\n| --- | --- | --- |\n", t.title)
		for _, f := range fields {
			kind := f.kind
			if f.required {
				kind += ", required"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.name, cell(kind), cell(f.doc))
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// words is a Go type name as lower-case words: GatewayController is
// "gateway controller".
func words(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func lowerFirst(s string) string {
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

func plural(kind string) string {
	switch {
	case strings.Contains(kind, " or "):
		return kind + " values"
	case strings.HasSuffix(kind, "s"):
		return kind
	}
	return kind + "s"
}

func joinQuoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		b, _ := json.Marshal(s)
		q[i] = string(b)
	}
	return strings.Join(q, ", ")
}
