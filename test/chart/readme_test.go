package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeInstall is the "Install on Kapsule" section of the install guide,
// docs/install.md, up to the next section of the same level or below.
func readmeInstall(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "\n## Install on Kapsule\n")
	if start < 0 {
		t.Fatal("docs/install.md has no section ## Install on Kapsule")
	}
	s = s[start+1:]
	if end := strings.Index(s[3:], "\n#"); end >= 0 {
		s = s[:end+3]
	}
	return s
}

// shellCommands are the commands of the section's sh code blocks, one per
// command: continuation lines joined, comments dropped.
func shellCommands(section string) []string {
	var out []string
	in := false
	cur := ""
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if i := strings.Index(line, "   #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			cur += strings.TrimSpace(more) + " "
			continue
		}
		if cur += line; strings.TrimSpace(cur) != "" {
			out = append(out, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return out
}

// shellWords splits a command as sh does for what the guide writes: words
// separated by blanks, double quotes grouping (and kept out of the word).
func shellWords(cmd string) []string {
	var words []string
	var w strings.Builder
	quoted, started := false, false
	for _, r := range cmd {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if started {
				words = append(words, w.String())
			}
			w.Reset()
			started = false
		default:
			w.WriteRune(r)
			started = true
		}
	}
	if started {
		words = append(words, w.String())
	}
	return words
}

func TestShellCommands(t *testing.T) {
	got := shellCommands("text\n```sh\nA=1   # why\nkubectl x \\\n  --a=\"$(jq -r .k f)\" \\\n  --b=c\n```\n```yaml\nno: 1\n```\n")
	want := []string{"A=1", `kubectl x --a="$(jq -r .k f)" --b=c`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if w := shellWords(want[1]); strings.Join(w, "|") != "kubectl|x|--a=$(jq -r .k f)|--b=c" {
		t.Fatalf("words %q", w)
	}
}
