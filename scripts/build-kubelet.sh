#!/usr/bin/env bash
# Builds the kubelet of k8s.io/kubernetes at a pinned version from the Go
# module proxy, for the tests that run a real kubelet. The result is cached as
# OUT (a path keyed by version, e.g. .tools/kubelet-v1.37.2); a second call
# with the binary present does nothing.
#
# `go install k8s.io/kubernetes/cmd/kubelet@V` does not work: the module's
# go.mod replaces every k8s.io staging module with ./staging/src/..., and the
# module zip leaves the nested staging modules out. So the module is copied,
# its replaces point at the published staging modules (v0.MINOR.PATCH), and
# it is built from there.
# Usage: scripts/build-kubelet.sh VERSION OUT
set -euo pipefail
version=${1:?usage: build-kubelet.sh VERSION OUT}
out=${2:?usage: build-kubelet.sh VERSION OUT}
[ -x "$out" ] && exit 0
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

go=${GO:-go}
staging=v0.${version#v1.}            # v1.37.2 -> v0.37.2
work=$(mktemp -d "$(dirname "$out")/.kubelet-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

echo "build-kubelet: k8s.io/kubernetes@$version from the module proxy (about 9 minutes cold on 2 cores)" >&2
dir=$(GOWORK=off GOFLAGS=-mod=mod "$go" mod download -json "k8s.io/kubernetes@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "build-kubelet: go mod download k8s.io/kubernetes@$version gave no source directory" >&2
  exit 1
fi
cp -r "$dir/." "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
rm -rf go.work go.work.sum vendor
# k8s.io/x => ./staging/src/k8s.io/x  becomes  k8s.io/x => k8s.io/x v0.N.M;
# the two sample modules are not published and the kubelet does not use them.
sed -i -E \
  -e '/k8s\.io\/sample-(cli-plugin|controller) => /d' \
  -e "s#(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+#\1 => \1 $staging#" \
  go.mod
if grep -q '=> ./staging' go.mod; then
  echo "build-kubelet: go.mod still replaces with ./staging:" >&2
  grep '=> ./staging' go.mod >&2
  exit 1
fi
GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 "$go" build -trimpath \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version" \
  -o "$work/kubelet" ./cmd/kubelet
"$work/kubelet" --version >&2
mv "$work/kubelet" "$out"
