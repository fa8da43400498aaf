package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyNamesTheDrift: a generated file that differs from what make
// generate writes, or is missing, fails Verify with its path, its source,
// the first differing line and make generate; one that matches does not.
func TestVerifyNamesTheDrift(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	same := File{"docs/a.md", []byte("one\ntwo\n"), "the code"}
	if err := Verify(root, []File{same}); err != nil {
		t.Fatalf("an up-to-date file: %v", err)
	}
	err := Verify(root, []File{{"docs/a.md", []byte("one\nthree\n"), "ipam/config.go"}, {"docs/b.md", []byte("x"), "values.yaml"}})
	if err == nil {
		t.Fatal("a drifted and a missing file passed")
	}
	for _, want := range []string{
		"docs/a.md is out of date with ipam/config.go: run make generate", "from line 2", "    two", "    three",
		"docs/b.md is out of date with values.yaml: run make generate", "the file is missing",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// TestSpliceJSON: the value at a path is replaced, formatted at its
// indentation, and every other byte is left as written.
func TestSpliceJSON(t *testing.T) {
	in := "{\n  \"a\": {\"keep\":   [1,2]},\n  \"b\": {\n    \"c\": {\"old\": true},\n    \"d\": 1\n  }\n}\n"
	v, err := parseJSON([]byte(`{"new": "x", "list": ["y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := spliceJSON([]byte(in), []string{"b", "c"}, v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": {\"keep\":   [1,2]},\n  \"b\": {\n    \"c\": {\"new\": \"x\", \"list\": [\"y\"]},\n    \"d\": 1\n  }\n}\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if _, err := spliceJSON([]byte(in), []string{"b", "e"}, v); err == nil || !strings.Contains(err.Error(), `no key "e"`) {
		t.Fatalf("a missing key: %v", err)
	}
}

// TestChartValues: a "# --" comment and the comment lines after it
// describe the next key; a commented-out example does not; nested keys get
// their path, and a parent is listed only when described.
func TestChartValues(t *testing.T) {
	values := strings.Join([]string{
		"# -- The pool file,",
		"# reloaded when it changes.",
		"config:",
		"  clusterName: \"\"",
		"  pools: []",
		"  # - name: dc-link",
		"  # -- No cap: 0.",
		"  defaultMaxPerNamespace: 0",
		"image:",
		"  tag: v1",
		"  enabled: true",
		"args: [--a]",
	}, "\n")
	vs, err := chartValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.path+"|"+v.kind+"|"+v.value+"|"+v.doc)
	}
	want := []string{
		"config|object||The pool file, reloaded when it changes.",
		`config.clusterName|string|""|`,
		"config.pools|list|[]|",
		"config.defaultMaxPerNamespace|int|0|No cap: 0.",
		"image.tag|string|v1|",
		"image.enabled|bool|true|",
		"args|list|[--a]|",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := chartValues([]byte("key: |\n  text\n")); err == nil {
		t.Fatal("a block scalar was read")
	}
}
