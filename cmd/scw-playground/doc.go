// Command scw-playground is `make run`: scw-lb-ipam on a real kube-apiserver
// and etcd with the Scaleway emulator, all on the loopback, until Ctrl-C.
package main
