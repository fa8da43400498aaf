#!/usr/bin/env bash
# Unpacks named (BIND 9.18) from Debian's (or Ubuntu's) packages, and the
# libraries they depend on that are not installed, into BIN/bind with
# apt-get download and dpkg -x: no service started, no file written outside
# BIN. BIN/named runs it with those libraries on LD_LIBRARY_PATH. The stamp
# is the packages' versions, so a security release is fetched once it is
# the candidate.
#
# usage: hack/fetch-named.sh BIN PACKAGE...
set -euo pipefail
bin=$1; shift
packages=("$@")
candidates() { apt-cache policy "$@" 2>/dev/null | awk '/^[^ ]/ { p = $1 } /Candidate:/ { print p, $2 }' | tr '\n' ' '; }

stamp=$(candidates "${packages[@]}")
if [[ "$stamp" != *"bind9-libs: "* || "$stamp" == *'(none)'* ]]; then
  [ "$(id -u)" = 0 ] || { echo "bin/named: apt knows no candidate for ${packages[*]}; run apt-get update as root" >&2; exit 1; }
  apt-get update -qq; stamp=$(candidates "${packages[@]}")
fi
case "$stamp" in "bind9: 1:9.18."*) ;; *) echo "bin/named: wants BIND 9.18 (Debian 12, Ubuntu 24.04), apt offers: $stamp" >&2; exit 1 ;; esac
mapfile -t libs < <(apt-cache depends "${packages[@]}" | awk '$1 == "Depends:" && $2 ~ /^lib/ { print $2 }' | sort -u |
  while read -r p; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"; done)
stamp=$(candidates "${packages[@]}" "${libs[@]}")
out=$bin/named stamp_file=$bin/.named.version
if [ -x "$out" ] && [ -x "$bin/bind/usr/sbin/named" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then
  echo "bin/named is up to date (${stamp%% bind9-libs*})"
  exit 0
fi
echo "fetching bin/named (Debian $stamp)…"
tmp=$bin/.bind.tmp
rm -rf "$bin/bind" "$tmp" "$stamp_file" && mkdir -p "$tmp/debs"
(cd "$tmp/debs" && apt-get download -q "${packages[@]}" "${libs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed')
for d in "$tmp"/debs/*.deb; do dpkg -x "$d" "$tmp/root"; done
libdir=$(dirname "$(find "$tmp/root" -name 'libdns-*.so' | head -1)")
missing=$(LD_LIBRARY_PATH="$libdir" ldd "$tmp/root/usr/sbin/named" | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' ')
[ -z "$missing" ] || { echo "bin/named: named needs libraries that are neither installed nor fetched: $missing(apt-get install the packages holding them)" >&2; exit 1; }
mv "$tmp/root" "$bin/bind" && rm -rf "$tmp"
libdir=${libdir#"$tmp/root"}
printf '%s\n' '#!/bin/sh' "# named from Debian's bind9, unpacked by make tools into bin/bind (see hack/fetch-named.sh)." \
  'bind=$(dirname "$(readlink -f "$0")")/bind' \
  "LD_LIBRARY_PATH=\"\$bind$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" exec \"\$bind/usr/sbin/named\" \"\$@\"" > "$out.tmp"
chmod +x "$out.tmp" && mv -f "$out.tmp" "$out" && echo "$stamp" > "$stamp_file"
"$out" -v
