// Package integration proves scw-lb-ipam on a real kube-apiserver and etcd
// built from source (make tools): the webhook and sweeper run in-process
// through the same wiring as the binary, the apiserver calls the webhook over
// TLS, and Scaleway is the project's emulator behind the real SDK.
//
// A suite: only its tests import, and only test/testenv and the layers
// below.
package integration
