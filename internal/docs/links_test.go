package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsLinks: every relative link between README.md, the chart's README
// and docs/ names a file that exists and, in a Markdown file, a heading.
func TestDocsLinks(t *testing.T) {
	files, err := MarkdownFiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d Markdown files found: %v", len(files), files)
	}
	broken, err := BrokenLinks("../..", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Errorf("broken link %s", b)
	}
}

// TestBrokenLinks: a missing file, a missing heading and a missing
// heading of the same file are each reported with their line; a link to a
// heading that exists, a directory, or a URL is not.
func TestBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## Full pools: retention is a promise\n\n## Twice\n\n## Twice\n")
	write("README.md", strings.Join([]string{
		"[ok](docs/a.md#full-pools-retention-is-a-promise) [dir](docs) [web](https://example.com/x.md#nope)",
		"[second](docs/a.md#twice-1) [self](#readme)",
		"[gone](docs/b.md)",
		"[no heading](docs/a.md#full-pools)",
		"# Readme",
		"```",
		"[in code](nowhere.md)",
		"```",
		"[self broken](#nope)",
	}, "\n"))
	broken, err := BrokenLinks(dir, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: docs/b.md: no such file docs/b.md",
		"README.md:4: docs/a.md#full-pools: no heading in docs/a.md has the anchor #full-pools",
		"README.md:9: #nope: no heading in README.md has the anchor #nope",
	}
	if strings.Join(broken, "\n") != strings.Join(want, "\n") {
		t.Fatalf("broken links:\n%s\nwant:\n%s", strings.Join(broken, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocsNameObjectsByFullname: the chart names its objects after its
// fullname (the release name, with the chart's name unless it already
// holds it), so "<release>-tls" is wrong for any release not named like
// the chart: the pages write "<fullname>-…".
func TestDocsNameObjectsByFullname(t *testing.T) {
	files, err := MarkdownFiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "charts/scw-lb-ipam/values.yaml")
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "<release>-") {
				t.Errorf("%s:%d names an object <release>-…; the chart names it <fullname>-…: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestDocsHoldNoMachinePath: a page shows paths relative to the checkout,
// never the absolute path of the machine it was written on.
func TestDocsHoldNoMachinePath(t *testing.T) {
	files, err := MarkdownFiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, p := range []string{"/work/", "/home/", "/root/", "/Users/"} {
				if strings.Contains(line, p) {
					t.Errorf("%s:%d holds a machine's path (%s): %s", f, i+1, p, strings.TrimSpace(line))
				}
			}
		}
	}
}
