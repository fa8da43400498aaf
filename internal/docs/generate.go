package docs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The files make generate writes, relative to the module's root.
const (
	schemaFile      = "charts/scw-lb-ipam/values.schema.json"
	valuesFile      = "charts/scw-lb-ipam/values.yaml"
	chartReadme     = "charts/scw-lb-ipam/README.md"
	poolFilePage    = "docs/pool-file.md"
	metricsPage     = "docs/metrics.md"
	troubleshooting = "docs/troubleshooting.md"
)

// File is one generated file: its path relative to the root, its content,
// and where it comes from (for the message that it drifted).
type File struct {
	Path string
	Data []byte
	From string
}

// Generate computes every generated file from the code under root. A page
// with hand-written prose keeps it: only the part between its
// "<!-- BEGIN make generate: NAME -->" and "<!-- END make generate: NAME -->"
// lines is replaced.
func Generate(root string) ([]File, error) {
	src, err := load(root)
	if err != nil {
		return nil, err
	}
	ipam, err := src.pkg("ipam")
	if err != nil {
		return nil, err
	}
	var files []File
	read := func(path string) ([]byte, error) { return os.ReadFile(filepath.Join(root, path)) }

	current, err := read(schemaFile)
	if err != nil {
		return nil, err
	}
	schema, err := poolSchema(ipam, current)
	if err != nil {
		return nil, err
	}
	files = append(files, File{schemaFile, schema, "the pool file's Go types in ipam/config.go"})

	parts := []struct {
		path, region, from string
		text               func() (string, error)
	}{
		{poolFilePage, "pool-file-fields", "the pool file's Go types in ipam/config.go", func() (string, error) { return poolReference(ipam) }},
		{metricsPage, "metrics", "the collectors the code registers (prometheus.New… and NewDesc)", func() (string, error) { return metricsReference(src) }},
		{troubleshooting, "denial-reasons", "the Reason constants and refusal constructors of package ipam", func() (string, error) { return reasonsReference(src, ipam) }},
	}
	for _, part := range parts {
		page, err := read(part.path)
		if err != nil {
			return nil, err
		}
		text, err := part.text()
		if err != nil {
			return nil, err
		}
		out, err := replaceRegion(part.path, page, part.region, text)
		if err != nil {
			return nil, err
		}
		files = append(files, File{part.path, out, part.from})
	}

	values, err := read(valuesFile)
	if err != nil {
		return nil, err
	}
	readme, err := chartValuesReadme(values)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesFile, err)
	}
	return append(files, File{chartReadme, readme, "the # -- comments of " + valuesFile}), nil
}

// replaceRegion puts text between a page's markers of region.
func replaceRegion(path string, page []byte, region, text string) ([]byte, error) {
	begin := "<!-- BEGIN make generate: " + region + " -->\n"
	end := "<!-- END make generate: " + region + " -->\n"
	s := string(page)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s has no lines %q and %q (in that order) around the part make generate writes", path, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	return []byte(s[:i+len(begin)] + text + "\n" + s[j:]), nil
}

// Write writes the files under root.
func Write(root string, files []File) error {
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f.Path), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Verify writes the files into a temporary directory, as make generate
// would write them, and compares each with the one under root: a drift is
// an error naming the file, where it is generated from, its first
// differing line and make generate.
func Verify(root string, files []File) error {
	tmp, err := os.MkdirTemp("", "scw-docs-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tmp, f.Path)), 0o755); err != nil {
			return err
		}
	}
	if err := Write(tmp, files); err != nil {
		return err
	}
	var drift []string
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(tmp, f.Path))
		if err != nil {
			return err
		}
		have, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		if !bytes.Equal(have, want) {
			drift = append(drift, fmt.Sprintf("%s is out of date with %s: run make generate and commit the result.\n%s", f.Path, f.From, firstDifference(have, want)))
		}
	}
	if len(drift) > 0 {
		return fmt.Errorf("%s", strings.Join(drift, "\n"))
	}
	return nil
}

// firstDifference shows where two versions of a file part: three lines of
// each from the first that differs.
func firstDifference(have, want []byte) string {
	if have == nil {
		return "  the file is missing"
	}
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	i := 0
	for i < len(h) && i < len(w) && h[i] == w[i] {
		i++
	}
	return fmt.Sprintf("  from line %d, the file has\n%s\n  and make generate writes\n%s", i+1, excerpt(h, i), excerpt(w, i))
}

func excerpt(lines []string, from int) string {
	var b strings.Builder
	for i := from; i < len(lines) && i < from+3; i++ {
		fmt.Fprintf(&b, "    %.160s\n", lines[i])
	}
	return strings.TrimSuffix(b.String(), "\n")
}
