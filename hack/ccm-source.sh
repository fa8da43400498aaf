#!/usr/bin/env bash
# Points LINK at the source of the Scaleway cloud-controller-manager at the
# commit pinned in VERSION_FILE: ../shared/scaleway-ccm (SHARED) when it is
# there (its PROVENANCE.md must name the commit), else a shallow clone of
# REPO into CLONES/<commit>. test/tools/neighbours/go.mod replaces the CCM's
# module by LINK: it is not on the Go module proxy. Then checks that the
# module selects the Kubernetes libraries the CCM pins, so that the CCM the
# tests run is built with them.
#
# usage: hack/ccm-source.sh LINK VERSION_FILE REPO SHARED CLONES MODULE_DIR
# GO names the go command (go by default).
set -euo pipefail
link=$1 version_file=$2 repo=$3 shared=$4 clones=$5 module_dir=$6
go=${GO:-go}

read -r commit _ < <(grep -v '^#' "$version_file" | grep -v '^[[:space:]]*$')
[[ "$commit" =~ ^[0-9a-f]{40}$ ]] || { echo "$version_file: no full commit hash" >&2; exit 1; }
if [ -d "$shared" ]; then
  src=$shared
  grep -q "$commit" "$src/PROVENANCE.md" || {
    echo "$src is not the pinned commit $commit (see its PROVENANCE.md and $version_file)" >&2; exit 1; }
else
  src=$clones/$commit
  if [ ! -f "$src/go.mod" ]; then
    echo "cloning $repo at $commit…"
    rm -rf "$src.tmp" && mkdir -p "$src.tmp"
    if ! { git -C "$src.tmp" init -q &&
      git -C "$src.tmp" fetch -q --depth 1 "$repo" "$commit" &&
      git -C "$src.tmp" -c advice.detachedHead=false checkout -q FETCH_HEAD &&
      [ "$(git -C "$src.tmp" rev-parse HEAD)" = "$commit" ] &&
      mv "$src.tmp" "$src"; }; then
      echo "cloning $repo at $commit failed" >&2; rm -rf "$src.tmp"; exit 1
    fi
  fi
fi
# An earlier layout kept the clone itself here, as a directory.
[ -L "$link" ] || rm -rf "$link"
mkdir -p "$(dirname "$link")" && ln -sfn "$(cd "$src" && pwd)" "$link"

# The Kubernetes libraries the CCM selects at a tagged version (client-go,
# cloud-provider, klog…; kube-openapi and utils are untagged commits, which
# the other programs may raise), and the versions the module selects.
required=$(cd "$src" && GOWORK=off "$go" mod edit -json | sed -n 's/^[[:space:]]*"Path": "\(k8s\.io\/[^"]*\)",$/\1/p' | sort -u)
want=$(cd "$src" && GOWORK=off GOFLAGS=-mod=readonly "$go" list -m -f '{{.Path}} {{.Version}}' $required | grep -E ' v[0-9]+\.[0-9]+\.[0-9]+$' || true)
[ -n "$want" ] || { echo "$src/go.mod requires no k8s.io module at a tagged version" >&2; exit 1; }
got=$(cd "$module_dir" && GOWORK=off GOFLAGS=-mod=readonly "$go" list -m -f '{{.Path}} {{.Version}}' $(echo "$want" | cut -d' ' -f1))
if [ "$want" != "$got" ]; then
  echo "$module_dir selects other Kubernetes libraries than the CCM at $commit pins:" >&2
  diff <(echo "$want") <(echo "$got") | sed -n 's/^[<>]/  &/p' >&2
  echo "the CCM would be built with them: pin the CCM's versions there (go get MODULE@VERSION, then go mod tidy)" >&2
  exit 1
fi
