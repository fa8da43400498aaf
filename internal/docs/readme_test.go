package docs

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeInstallIsTheGuides: each command of the README's install
// section is written, as is, in docs/install.md, whose marked blocks make
// e2e runs as written (test/e2e TestGuide); so the short version cannot
// drift from the tested one.
func TestReadmeInstallIsTheGuides(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Install on Kapsule\n")
	if !ok {
		t.Fatal("README.md has no section ## Install on Kapsule")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var commands []string
	fenced := false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case fenced && strings.TrimSpace(line) != "":
			commands = append(commands, strings.TrimSpace(line))
		}
	}
	if len(commands) != 4 {
		t.Errorf("the README installs in %d commands, want 4: %q", len(commands), commands)
	}
	for _, c := range commands {
		if !strings.Contains(string(guide), c) {
			t.Errorf("the README's %q is not in docs/install.md", c)
		}
		// helm test checks the webhook, which answers once a pod is
		// ready: the install before it must wait for them.
		if strings.HasPrefix(c, "helm upgrade") && !strings.Contains(c, " --wait") {
			t.Errorf("the README's %q does not wait for the pods before helm test", c)
		}
	}
}
