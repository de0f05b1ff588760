#!/usr/bin/env bash
# Builds containerd and its runc shim (containerd-shim-runc-v2) at a pinned
# version from the Go module proxy, static, for the tests that run a
# containerd 1.7 or 2.x beside Debian's 1.6: github.com/containerd/containerd
# for v1.x, github.com/containerd/containerd/v2 for v2.x. The result is
# cached as OUT/containerd and OUT/containerd-shim-runc-v2 (a directory keyed
# by version, e.g. .tools/containerd-v2.4.2); a second call with both present
# does nothing. runc is Debian's.
# Usage: scripts/build-containerd.sh VERSION OUT
set -euo pipefail
version=${1:?usage: build-containerd.sh VERSION OUT}
out=${2:?usage: build-containerd.sh VERSION OUT}
[ -x "$out/containerd" ] && [ -x "$out/containerd-shim-runc-v2" ] && exit 0
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

go=${GO:-go}
work=$(mktemp -d "$(dirname "$out")/.containerd-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

case $version in
  v1.*) module=github.com/containerd/containerd ;;
  v2.*) module=github.com/containerd/containerd/v2 ;;
  *) echo "build-containerd: $version: not a containerd v1.x or v2.x version" >&2; exit 2 ;;
esac
echo "build-containerd: $module@$version from the module proxy (about 2 minutes cold on 2 cores)" >&2
cd "$work"
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
"$go" mod init containerd-build >/dev/null 2>&1
if ! "$go" get "$module@$version"; then
  echo "build-containerd: $module@$version is not served by the module proxy" >&2
  exit 1
fi
# The snapshotters that need cgo or kernel features this VM lacks stay out;
# overlayfs and native are what the CRI uses here.
tags="no_btrfs no_devmapper no_zfs no_aufs"
mkdir -p "$work/bin"
"$go" build -trimpath -tags "$tags" \
  -ldflags "-s -w -X $module/version.Version=$version" \
  -o "$work/bin/containerd" $module/cmd/containerd
"$go" build -trimpath \
  -ldflags "-s -w -X $module/version.Version=$version" \
  -o "$work/bin/containerd-shim-runc-v2" $module/cmd/containerd-shim-runc-v2
"$work/bin/containerd" --version >&2
rm -rf "$out"
mv "$work/bin" "$out"
