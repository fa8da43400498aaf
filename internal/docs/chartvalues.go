package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// Hand-written rather than helm-docs (github.com/norwoodj/helm-docs): it is
// not among the modules this project may fetch, and what it would read
// here is a few lines of syntax: the chart's values.yaml is plain
// "key: value" lines and flow collections, with "# --" opening a key's
// description as helm-docs has it.

// valueKey is a "key: value" line of values.yaml.
var valueKey = regexp.MustCompile(`^( *)([A-Za-z0-9_.-]+):(?: +(.*))?$`)

var integer = regexp.MustCompile(`^-?[0-9]+$`)

// chartValue is one key of values.yaml.
type chartValue struct {
	path, kind, value, doc string
	parent                 bool
}

// chartValues reads values.yaml's keys with their "# --" descriptions: a
// comment that starts with "# --" and the comment lines right after it
// describe the next key; other comments (examples commented out) do not.
func chartValues(values []byte) ([]chartValue, error) {
	type level struct {
		indent int
		key    string
	}
	var stack []level
	var out []chartValue
	var doc []string
	describing := false
	lines := strings.Split(string(values), "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			doc, describing = []string{strings.TrimSpace(strings.TrimPrefix(trimmed, "# --"))}, true
			continue
		case strings.HasPrefix(trimmed, "#"):
			if describing {
				doc = append(doc, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "- "):
			describing = describing && trimmed == ""
			continue
		}
		m := valueKey.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: %q is neither a comment nor key: value (block scalars and multi-line lists are not read: write them in flow style)", i+1, line)
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, level{indent, m[2]})
		keys := make([]string, len(stack))
		for j, l := range stack {
			keys[j] = l.key
		}
		v := chartValue{path: strings.Join(keys, "."), value: strings.TrimSpace(m[3]), doc: strings.Join(doc, " ")}
		v.parent = v.value == "" && nextIsDeeper(lines[i+1:], indent)
		v.kind = valueKind(v.value, v.parent)
		if !v.parent || v.doc != "" {
			out = append(out, v)
		}
		doc, describing = nil, false
	}
	return out, nil
}

// nextIsDeeper: the next key line is indented more than indent.
func nextIsDeeper(rest []string, indent int) bool {
	for _, l := range rest {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		return len(l)-len(strings.TrimLeft(l, " ")) > indent
	}
	return false
}

func valueKind(v string, parent bool) string {
	switch {
	case parent, strings.HasPrefix(v, "{"):
		return "object"
	case strings.HasPrefix(v, "["):
		return "list"
	case v == "true" || v == "false":
		return "bool"
	case integer.MatchString(v):
		return "int"
	}
	return "string"
}

// chartValuesReadme is the chart's README: its values, from values.yaml.
func chartValuesReadme(values []byte) ([]byte, error) {
	vs, err := chartValues(values)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# The scw-lb-ipam chart\n\n")
	b.WriteString("<!-- make generate writes this file from the \"# --\" comments of values.yaml: edit those. -->\n\n")
	b.WriteString("Stable private IPs for Scaleway Load Balancers: the webhook and sweeper of scw-lb-ipam. How to\n")
	b.WriteString("install it on Kapsule: [docs/install.md](../../docs/install.md); the pool file under `config`:\n")
	b.WriteString("[docs/pool-file.md](../../docs/pool-file.md).\n\n")
	b.WriteString("## Values\n\n| key | type | default | description |\n| --- | --- | --- | --- |\n")
	for _, v := range vs {
		def := "`" + v.value + "`"
		if v.parent {
			def = ""
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.path, v.kind, cell(def), cell(v.doc))
	}
	return []byte(b.String()), nil
}
