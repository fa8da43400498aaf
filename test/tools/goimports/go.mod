// Pins goimports, which `make lint` builds into bin/goimports to check the
// grouping of imports. Its own module, to keep it out of the main go.mod. To
// move: change the version, then run here
//   go mod tidy
module github.com/scw-lb-ipam/scw-lb-ipam/test/tools/goimports

go 1.26.0

require golang.org/x/tools v0.52.0

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/telemetry v0.0.0-20261009151841-97e8ea77aa2a // indirect
)
