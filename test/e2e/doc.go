// Package e2e installs the Helm chart for real: on a single-node cluster
// built from source (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and a kubelet on Debian's containerd and runc), inside a
// network namespace and a mount namespace the suite creates, with the image
// make image built. It proves what the other suites run as processes: the
// image's entrypoint and user, its read-only root with the memory emptyDir,
// the probes, the projected ServiceAccount token, leader election between
// two pods, and the apiserver reaching the webhook through the Service's
// endpoints.
//
// It needs root (namespaces, mounts, cgroups) and runs from make e2e, which
// builds the node's binaries and installs the Debian packages. After the
// run, the suite checks that nothing is left on the host: no process, mount,
// network namespace, cgroup, iptables rule or changed kernel setting.
//
// A suite: only its tests import, and only the layers below.
package e2e
