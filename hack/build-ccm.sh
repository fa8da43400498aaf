#!/usr/bin/env bash
# Builds the Scaleway cloud-controller-manager at the commit pinned in
# VERSION_FILE into OUT, from the module MODULE_DIR (test/tools/neighbours),
# which replaces the CCM's module by LINK: hack/ccm-source.sh points LINK at
# the source (SHARED, or a clone of REPO in CLONES). A stamp beside OUT (the
# module, the commit, and a hash of both go.mod files and the link flags)
# skips the build when nothing changed.
#
# usage: hack/build-ccm.sh OUT VERSION_FILE REPO MODULE SHARED CLONES LINK MODULE_DIR
# GO names the go command (go by default).
set -euo pipefail
out=$1 version_file=$2 repo=$3 module=$4 shared=$5 clones=$6 link=$7 module_dir=$8
go=${GO:-go}

"$(dirname "$0")/ccm-source.sh" "$link" "$version_file" "$repo" "$shared" "$clones" "$module_dir"
read -r commit describe < <(grep -v '^#' "$version_file" | grep -v '^[[:space:]]*$')
src=$(readlink "$link")

ldflags="-s -w -X $module/scaleway.version=$describe -X $module/scaleway.gitCommit=$commit"
stamp="$module $commit $( { for d in "$src" "$module_dir"; do (cd "$d" && GOWORK=off GOFLAGS=-mod=readonly "$go" mod edit -json); done; echo "$ldflags"; } | sha256sum | cut -c1-16)"
stamp_file=$(dirname "$out")/.$(basename "$out").version
if [ -x "$out" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then
  echo "$out is up to date ($module $describe)"
  exit 0
fi
echo "building $out ($module $describe) from $src…"
mkdir -p "$(dirname "$out")" && rm -f "$stamp_file" "$out.tmp"
(cd "$module_dir" && GOWORK=off CGO_ENABLED=0 GOFLAGS='-mod=readonly -buildvcs=false' \
  nice -n 10 "$go" build -trimpath -gcflags=all=-dwarf=false -ldflags="$ldflags" -o "$out.tmp" "$module/cmd/scaleway-cloud-controller-manager")
mv -f "$out.tmp" "$out" && echo "$stamp" > "$stamp_file"
