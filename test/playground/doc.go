// Package playground is the suite of `make run`: it builds cmd/scw-playground
// and cmd/scw-lb-ipam, starts the playground as a newcomer would, walks the
// transcript of README.md and docs/development.md (apply the example Service, read its annotations and
// the warning, run status), then presses Ctrl-C and checks that no process
// or temporary file is left. The playground itself is internal/playground.
//
// A suite: only its tests import, and only internal/testenv and the layers
// below.
package playground
