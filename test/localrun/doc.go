// Package localrun is what a run of scw-lb-ipam on one machine needs,
// whether a test's or make run's: a free port for a listener, a pool file
// written against the emulator's Private Networks, and a poll that waits
// for a condition.
//
// It is apart from test/fixtures because test/playground (make run)
// and test/testenv use these three and nothing else of the unit tests'
// scaffolding, and test/fixtures builds on these. It imports only the
// emulator's types; nothing the binary ships imports it.
package localrun
