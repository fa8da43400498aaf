// Package docs keeps the documentation true to the code. It writes the
// reference parts of the docs from the Go types and their doc comments (the
// pool file's JSON schema in the chart's values.schema.json and its page
// docs/pool-file.md, the metrics page, the denial reasons, the chart's
// README from values.yaml's "# --" comments), checks that the files on disk
// match what it would write (make verify), and checks the relative links
// between README.md and docs/.
//
// It reads the source with golang.org/x/tools/go/packages rather than
// importing the packages it documents, so that a doc comment is the one
// source of a field's description. It imports ipam/scaleway for the region
// list alone. cmd/scw-docs runs it; nothing else imports it.
package docs
