#!/usr/bin/env bash
# Builds the commands of a Go module at a pinned version from the Go module
# proxy, for the cluster tests: etcd, the Prometheus Operator and its config
# reloader, kube-state-metrics. The result is cached in OUT (a directory
# keyed by version, e.g. .tools/etcd-v3.7.4); a second call with every
# binary present does nothing.
#
# `go install MODULE/cmd/X@V` is refused for etcd and the operator: their
# go.mod replaces sibling modules with relative paths (../api, ./pkg/client),
# which the module zip does not carry. So the module is copied, the relative
# replaces are dropped (the published modules of the same version resolve
# instead), and it is built from there. COPY=DIR1:DIR2 copies directories of
# the module into OUT too (the operator's CRDs).
# TAGS are the module's own release build tags (Thanos: netgo,slicelabels).
# Usage: scripts/build-module.sh MODULE VERSION OUT PKG...   (PKG relative to the module root, e.g. ./cmd/operator)
set -euo pipefail
module=${1:?usage: build-module.sh MODULE VERSION OUT PKG...}
version=${2:?usage: build-module.sh MODULE VERSION OUT PKG...}
out=${3:?usage: build-module.sh MODULE VERSION OUT PKG...}
shift 3
[ $# -gt 0 ] || { echo "build-module: no package to build" >&2; exit 2; }
# The binary of ./cmd/x is x; of the module root (.), the module's last
# element that is not a major version (go.etcd.io/etcd/server/v3: server)
# unless NAME says otherwise.
binname() {
  if [ "$1" = . ]; then
    if [ -n "${NAME:-}" ]; then echo "$NAME"; return; fi
    local m=${module%/v[0-9]*}
    echo "${m##*/}"
  else
    basename "$1"
  fi
}
. "$(dirname "$0")/lib/gomodule.sh"
missing=()
for p in "$@"; do [ -x "$out/$(binname "$p")" ] || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
mkdir -p "$out"
out=$(cd "$out" && pwd)

go=${GO:-go}
work=$(mktemp -d "$(dirname "$out")/.module-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

echo "build-module: ${missing[*]} of $module@$version from the module proxy" >&2
mkdir "$work/src"
GO=$go module_source "$module" "$version" "$work/src" || { echo "build-module: no source of $module@$version" >&2; exit 1; }
cd "$work/src"
# Both forms: `replace a => ../a` and, inside a replace block, `a => ./a`.
sed -i -E -e '/^replace .* => \.\.?\//d' -e '/^[[:space:]]+[^[:space:]]+( v[^[:space:]]+)? => \.\.?\//d' go.mod
if grep -qE '=> \.\.?/' go.mod; then
  echo "build-module: go.mod still replaces with a relative path:" >&2
  grep -E '=> \.\.?/' go.mod >&2
  exit 1
fi
for p in "${missing[@]}"; do
  [ -d "$p" ] || { echo "build-module: $module@$version has no package $p" >&2; exit 1; }
done
mkdir -p "$work/bin"
# The module's go.mod may name a newer patch toolchain than this machine's
# Go: the local one builds it (GOTOOLCHAIN=local), nothing is downloaded,
# unless TOOLCHAIN names the Go release to build with (one the module proxy
# serves, for a go.mod whose go line is newer than this machine's Go).
for p in "${missing[@]}"; do
  GOTOOLCHAIN=${TOOLCHAIN:-local} GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 "$go" build -trimpath \
    ${TAGS:+-tags "$TAGS"} -ldflags "-s -w" -o "$work/bin/$(binname "$p")" "$p"
done
IFS=: read -r -a copies <<< "${COPY:-}"
for d in "${copies[@]}"; do
  [ -n "$d" ] || continue
  [ -d "$d" ] || { echo "build-module: $module@$version has no directory $d" >&2; exit 1; }
  rm -rf "${out:?}/$(basename "$d")"
  cp -r "$d" "$out/"
done
for p in "${missing[@]}"; do
  mv "$work/bin/$(binname "$p")" "$out/"
  echo "build-module: $out/$(binname "$p")" >&2
done
