// Package testenv starts what the suites on a real control plane share:
// kube-apiserver and etcd from bin/ (make tools), the chart's rendered
// MutatingWebhookConfiguration, the Scaleway emulator, and scw-lb-ipam
// itself through internal/app, in process.
//
// StartControlPlane is the one bootstrap of kube-apiserver and etcd, which
// Start, the chart suite and the playground use alike. Start adds the
// webhook replicas and the reads of their metrics (Observer), and the
// Scaleway CCM (Env.CCM): the real one, a process started by
// test/ccmprocess, or for one scenario a fake of v0.35 (test/oldccm).
// It imports internal/app, the emulator, those two and test/localrun
// (free ports, the pool file, the poll), never the unit tests' fixtures,
// since the playground imports it; nothing the binary ships imports it.
//
// # Logs
//
// The suites discard the logs of what they run, or keep them for a failure
// message. SCW_LB_IPAM_TEST_VERBOSE=1 (VerboseEnv), the one switch of
// every suite that starts a control plane here (integration, clients,
// chart, chaos, bench), copies them to stderr as well: scw-lb-ipam's
// webhook and sweeper, the CCM (whose output is also in a file each,
// CCM.Logs), and kube-apiserver. make run's
// playground does not read it: its -v flag is its own.
//
// # One scenario of one suite
//
// The suites need bin/'s kube-apiserver, etcd, helm and kubectl (make
// tools); the chart suite also needs the CRDs and the image (make crds
// image). -run selects a test, and one of its subtests after a slash
// (spaces in a subtest's name become underscores); -count=1 runs it rather
// than replay a cached pass:
//
//	make tools
//	SCW_LB_IPAM_TEST_VERBOSE=1 go test -count=1 -v -run 'TestPoolAnnotationReservesAnIP$' ./test/integration
//	SCW_LB_IPAM_TEST_VERBOSE=1 go test -count=1 -v -run 'TestConvergenceMonitor/converged' ./test/integration
//	make tools crds image
//	SCW_LB_IPAM_TEST_VERBOSE=1 go test -count=1 -v -run 'TestServerSideDryRun/self-managed' ./test/chart
package testenv
