// Package archtest holds the tests of the project's shape: the layers of
// the import graph (written once, in layers_test.go, and shown in the
// Layers section of docs/architecture.md), where scaleway-sdk-go may be imported,
// what the shipped binary must not link, and the size limits of code that
// is not a test (size_test.go: functions, files; methods_test.go: a type's
// method set, promoted methods included), and
// that the CI workflow caches every tool the Makefile builds and runs the
// root suites (ci_test.go), and that helm's module shares the main module's
// versions (modules_test.go). It has no code of its own and imports nothing.
package archtest
