// Command scw-playground is `make run`: scw-lb-ipam on a real kube-apiserver
// and etcd with the Scaleway emulator, all on the loopback, until Ctrl-C.
//
// It is a thin command over test/playground and imports nothing else of
// the module.
package main
