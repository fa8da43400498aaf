package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// mdLink is an inline Markdown link; its target has no spaces.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Anchors are the fragment identifiers GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces as hyphens, and a
// repeated one numbered from -1.
func Anchors(markdown string) map[string]bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(markdown) {
		title, ok := heading(line)
		if !ok {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func heading(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, "#")
	if n := len(line) - len(trimmed); n == 0 || n > 6 || !strings.HasPrefix(trimmed, " ") {
		return "", false
	}
	return strings.TrimSpace(trimmed), true
}

// proseLines are a Markdown file's lines outside fenced code blocks.
func proseLines(markdown string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// BrokenLinks checks the relative links of the Markdown files (paths
// relative to root): each must name a file or directory that exists and,
// for a Markdown file, a heading's anchor when it has a fragment. It
// returns one line per broken link, naming the file, the line and why.
func BrokenLinks(root string, files []string) ([]string, error) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		anchors[path] = Anchors(string(b))
		return anchors[path], nil
	}
	var broken []string
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				if why := checkLink(root, file, m[1], anchorsOf); why != "" {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", file, i+1, m[1], why))
				}
			}
		}
	}
	return broken, nil
}

func checkLink(root, from, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, fragment, _ := strings.Cut(target, "#")
	if path == "" {
		path = from
	} else {
		path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), path)))
	}
	st, err := os.Stat(filepath.Join(root, path))
	if err != nil {
		return "no such file " + path
	}
	if fragment == "" || st.IsDir() || !strings.HasSuffix(path, ".md") {
		return ""
	}
	a, err := anchorsOf(path)
	if err != nil {
		return err.Error()
	}
	if !a[fragment] {
		return "no heading in " + path + " has the anchor #" + fragment
	}
	return ""
}

// MarkdownFiles are README.md, the chart's README and every Markdown file
// under docs/, relative to root.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{"README.md", chartReadme}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	return files, err
}
