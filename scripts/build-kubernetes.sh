#!/usr/bin/env bash
# Builds commands of k8s.io/kubernetes at a pinned version from the Go module
# proxy, for the tests that run a real kubelet and a real control plane. All
# the commands come from ONE `go build` (they share the compilation of the
# packages they have in common: the control plane adds about 5 minutes to the
# kubelet's 9 on 2 cores instead of 15). The result is cached in OUT (a
# directory keyed by version, e.g. .tools/kubernetes-v1.37.2); a second call
# with every binary present does nothing, a call that asks for more builds
# only those (with a warm Go cache, the rest is linked, not compiled).
#
# `go install k8s.io/kubernetes/cmd/kubelet@V` does not work: the module's
# go.mod replaces every k8s.io staging module with ./staging/src/..., and the
# module zip leaves the nested staging modules out. So the module is copied,
# its replaces point at the published staging modules (v0.MINOR.PATCH), and
# it is built from there.
# Usage: scripts/build-kubernetes.sh VERSION OUT CMD...   (CMD: kubelet, kube-apiserver, ...)
set -euo pipefail
version=${1:?usage: build-kubernetes.sh VERSION OUT CMD...}
out=${2:?usage: build-kubernetes.sh VERSION OUT CMD...}
shift 2
[ $# -gt 0 ] || { echo "build-kubernetes: no command to build" >&2; exit 2; }
. "$(dirname "$0")/lib/gomodule.sh"
mapfile -t missing < <(missing_binaries "$out" "$@")
[ ${#missing[@]} -eq 0 ] && exit 0
mkdir -p "$out"
out=$(cd "$out" && pwd)

go=${GO:-go}
staging=v0.${version#v1.}            # v1.37.2 -> v0.37.2
work=$(mktemp -d "$(dirname "$out")/.kubernetes-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

echo "build-kubernetes: ${missing[*]} of k8s.io/kubernetes@$version from the module proxy (the kubelet alone about 9 minutes cold on 2 cores, with the control plane about 15)" >&2
mkdir "$work/src"
GO=$go module_source k8s.io/kubernetes "$version" "$work/src" || { echo "build-kubernetes: no source of k8s.io/kubernetes@$version" >&2; exit 1; }
cd "$work/src"
# k8s.io/x => ./staging/src/k8s.io/x  becomes  k8s.io/x => k8s.io/x v0.N.M;
# the two sample modules are not published and no command here uses them.
sed -i -E \
  -e '/k8s\.io\/sample-(cli-plugin|controller) => /d' \
  -e "s#(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+#\1 => \1 $staging#" \
  go.mod
if grep -q '=> ./staging' go.mod; then
  echo "build-kubernetes: go.mod still replaces with ./staging:" >&2
  grep '=> ./staging' go.mod >&2
  exit 1
fi
# Every staging module the replaces name must be on the module proxy: say
# which one is not, before a build that would fail on it among others.
mapfile -t staged < <(sed -n -E "s#^[[:space:]]*(replace[[:space:]]+)?k8s\.io/[a-z0-9-]+ => (k8s\.io/[a-z0-9-]+) ($staging)\$#\2@\3#p" go.mod)
if ! GOWORK=off GOFLAGS=-mod=mod "$go" mod download "${staged[@]}" 2>/dev/null; then
  for m in "${staged[@]}"; do
    if ! err=$(GOWORK=off GOFLAGS=-mod=mod "$go" mod download "$m" 2>&1); then
      echo "build-kubernetes: $m, a staging module of k8s.io/kubernetes@$version, is not on the module proxy: $err" >&2
      exit 1
    fi
  done
fi
pkgs=()
for c in "${missing[@]}"; do
  [ -d "cmd/$c" ] || { echo "build-kubernetes: k8s.io/kubernetes@$version has no cmd/$c" >&2; exit 1; }
  pkgs+=("./cmd/$c")
done
mkdir -p "$work/bin"
GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 "$go" build -trimpath \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version" \
  -o "$work/bin/" "${pkgs[@]}"
for c in "${missing[@]}"; do
  # kubectl has a version command, the daemons a flag.
  if [ "$c" = kubectl ]; then "$work/bin/$c" version --client >&2; else "$work/bin/$c" --version >&2; fi
  mv "$work/bin/$c" "$out/$c"
done
