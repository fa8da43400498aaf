//go:build tools

// Package tools records the commands `make tools` builds, so that go.mod and
// go.sum keep their dependencies. Nothing imports it.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"                     // bin/etcd
	_ "k8s.io/kubernetes/cmd/kube-apiserver"          // bin/kube-apiserver
	_ "k8s.io/kubernetes/cmd/kube-controller-manager" // bin/kube-controller-manager (make e2e)
	_ "k8s.io/kubernetes/cmd/kube-scheduler"          // bin/kube-scheduler (make e2e)
	_ "k8s.io/kubernetes/cmd/kubectl"                 // bin/kubectl
	_ "k8s.io/kubernetes/cmd/kubelet"                 // bin/kubelet (make e2e)
)
