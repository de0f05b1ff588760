#!/usr/bin/env bash
# Builds containerd and its runc shim (containerd-shim-runc-v2) of
# github.com/containerd/containerd/v2 at a pinned version from the Go module
# proxy, static, for the tests that run a containerd 2.x beside Debian's 1.6.
# The result is cached as OUT/containerd and OUT/containerd-shim-runc-v2 (a
# directory keyed by version, e.g. .tools/containerd-v2.4.2); a second call
# with both present does nothing. runc is Debian's.
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

echo "build-containerd: github.com/containerd/containerd/v2@$version from the module proxy (about 2 minutes cold on 2 cores)" >&2
cd "$work"
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
"$go" mod init containerd-build >/dev/null 2>&1
"$go" get "github.com/containerd/containerd/v2@$version"
# The snapshotters that need cgo or kernel features this VM lacks stay out;
# overlayfs and native are what the CRI uses here.
tags="no_btrfs no_devmapper no_zfs no_aufs"
mkdir -p "$work/bin"
"$go" build -trimpath -tags "$tags" \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$version" \
  -o "$work/bin/containerd" github.com/containerd/containerd/v2/cmd/containerd
"$go" build -trimpath \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$version" \
  -o "$work/bin/containerd-shim-runc-v2" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
"$work/bin/containerd" --version >&2
rm -rf "$out"
mv "$work/bin" "$out"
