#!/bin/sh
# private-root.sh ROOT CERTS SERVICEACCOUNT COMMAND [ARG...]
#
# Run by the Gateway suite under `unshare --mount` (a private mount
# namespace): mounts a tmpfs on ROOT (an empty directory), mirrors there
# every directory of / with a recursive bind mount and every symbolic link,
# adds /certs (bound to CERTS) and an empty /run with the in-cluster
# service-account directory (bound to SERVICEACCOUNT), and runs COMMAND
# chrooted there. Envoy Gateway reads its certificates from the hard-coded
# /certs: this gives it one without writing /certs, or anything else, on the
# host. Every mount vanishes with the namespace. exec keeps one process, so
# the suite's signals reach the command itself.
set -eu
root=$1 certs=$2 sa=$3
shift 3
mount -t tmpfs -o mode=0755 private-root "$root"
for entry in /*; do
	name=${entry#/}
	if [ -L "$entry" ]; then
		ln -s "$(readlink "$entry")" "$root/$name"
	elif [ -d "$entry" ] && [ "$name" != run ]; then
		mkdir "$root/$name"
		mount --rbind "$entry" "$root/$name"
	fi
done
mkdir -p "$root/certs" "$root/run/secrets/kubernetes.io/serviceaccount"
mount --bind "$certs" "$root/certs"
mount --bind "$sa" "$root/run/secrets/kubernetes.io/serviceaccount"
exec chroot "$root" "$@"
