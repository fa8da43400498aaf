// Package ccmprocess runs the real Scaleway cloud-controller-manager
// (bin/scaleway-cloud-controller-manager, built by make tools from the
// commit test/tools/ccm.version pins) beside a local control plane, the way
// a user's cluster runs it: a process of its own, with its own kubeconfig
// for the identity its shipped manifest gives it (the ServiceAccount
// kube-system/cloud-controller-manager and the ClusterRole
// system:cloud-controller-manager, copied here in Grant), its credentials
// and settings from the environment, only the service controller on, and
// the Scaleway APIs at the emulator's URL.
//
// Where no kubelet runs, RegisterNodes creates the Node objects the
// service controller places backends on. The suites (test/testenv),
// make run (test/playground) and the chaos run start it through Start;
// nothing the binary ships imports this package.
package ccmprocess
