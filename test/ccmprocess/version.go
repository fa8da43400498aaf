package ccmprocess

import (
	"os"
	"path/filepath"
	"strings"
)

// Version is what test/tools/ccm.version pins, as `git describe` names it
// (e.g. v0.36.2-4-gbddc17f), for banners and reports; "unknown" when the
// file cannot be read.
func Version(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "test", "tools", "ccm.version"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			return f[1]
		}
	}
	return "unknown"
}
