package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// object is a JSON object that keeps its keys' order, so that a schema
// rewritten by make generate keeps the order it was written in.
type object struct {
	keys   []string
	values map[string]any
}

func newObject() *object { return &object{values: map[string]any{}} }

func (o *object) set(k string, v any) {
	if _, ok := o.values[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.values[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.values[k]; !ok {
		return
	}
	delete(o.values, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			return
		}
	}
}

// parseJSON reads a JSON value with its objects as *object.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := newObject()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k.(string), v)
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	return tok, nil
}

// lineWidth is where formatJSON breaks an object or an array over lines.
const lineWidth = 110

// writeJSON writes v as the chart's schema is written: an object or an
// array on one line when it fits in lineWidth columns with its indentation,
// else one member per line.
func writeJSON(b *strings.Builder, v any, indent int) {
	if flat := compact(v); indent+len(flat) <= lineWidth {
		b.WriteString(flat)
		return
	}
	pad := strings.Repeat("  ", indent+1)
	switch v := v.(type) {
	case *object:
		b.WriteString("{\n")
		for i, k := range v.keys {
			b.WriteString(pad + scalar(k) + ": ")
			writeJSON(b, v.values[k], indent+1)
			b.WriteString(comma(i, len(v.keys)) + "\n")
		}
		b.WriteString(strings.Repeat("  ", indent) + "}")
	case []any:
		b.WriteString("[\n")
		for i, e := range v {
			b.WriteString(pad)
			writeJSON(b, e, indent+1)
			b.WriteString(comma(i, len(v)) + "\n")
		}
		b.WriteString(strings.Repeat("  ", indent) + "]")
	default:
		b.WriteString(compact(v))
	}
}

func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

// compact is v on one line, with a space after each colon and comma.
func compact(v any) string {
	switch v := v.(type) {
	case *object:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = scalar(k) + ": " + compact(v.values[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = compact(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return scalar(v)
}

func scalar(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only strings, numbers, booleans and null get here
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// spliceJSON replaces the value at path (object keys from the top) in the
// JSON text data with v, formatted at the value's indentation, and leaves
// every other byte as it was: the rest of the schema stays as written.
func spliceJSON(data []byte, path []string, v any) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	start, end, err := findValue(dec, data, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(path, "."), err)
	}
	lineStart := bytes.LastIndexByte(data[:start], '\n') + 1
	indent := (len(data[lineStart:start]) - len(bytes.TrimLeft(data[lineStart:start], " "))) / 2
	var b strings.Builder
	writeJSON(&b, v, indent)
	return slices.Concat(data[:start], []byte(b.String()), data[end:]), nil
}

// findValue reads dec down path and returns where the value there starts
// and ends in data.
func findValue(dec *json.Decoder, data []byte, path []string) (int, int, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, 0, fmt.Errorf("not an object")
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return 0, 0, err
		}
		if k != path[0] {
			if _, err := decodeValue(dec); err != nil {
				return 0, 0, err
			}
			continue
		}
		if len(path) > 1 {
			return findValue(dec, data, path[1:])
		}
		start := int(dec.InputOffset())
		for start < len(data) && (data[start] == ':' || data[start] == ' ' || data[start] == '\n' || data[start] == '\t') {
			start++
		}
		if _, err := decodeValue(dec); err != nil {
			return 0, 0, err
		}
		return start, int(dec.InputOffset()), nil
	}
	return 0, 0, fmt.Errorf("no key %q", path[0])
}
