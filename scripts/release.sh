#!/usr/bin/env bash
# make release: the release tarballs of this commit, for linux/amd64 and
# linux/arm64, in OUT (default .build/release), with sha256sums.txt.
#
#   pleg_exporter-VERSION.linux-ARCH.tar.gz
#     pleg_exporter-VERSION.linux-ARCH/
#       pleg_exporter  LICENSE  README.md  CHANGELOG.md
#       mixin/prometheus_alerts.yaml  mixin/prometheus_rules.yaml
#       dashboards/pleg-fleet.json  dashboards/pleg-node.json
#
# Reproducible: the same commit gives the same bytes, wherever the tree is
# and whatever the Go build cache holds (the release test builds twice,
# from two copies, and compares). So nothing of the machine goes in: the
# build date is the commit's, paths are trimmed, no VCS stamp, the tar has
# fixed owners, modes, order and times, gzip no name or time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}" "${OUT:=.build/release}"
ARCHES=${ARCHES:-"amd64 arm64"}

version=$(cat VERSION)
# REVISION and SOURCE_DATE_EPOCH name the commit where there is no .git (a
# copy of the tree, as the release test makes).
revision=${REVISION:-$(git rev-parse HEAD)}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
if [ -z "${REVISION:-}" ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "make release: the tree has uncommitted changes; a release is built from a commit" >&2
  [ -n "${RELEASE_DIRTY:-}" ] || exit 1
fi
pkg=github.com/prometheus/common/version
ldflags="-s -w -X $pkg.Version=$version -X $pkg.Revision=$revision -X $pkg.Branch=HEAD -X $pkg.BuildUser=release"
ldflags+=" -X $pkg.BuildDate=$(date -u -d "@$epoch" +%Y%m%d-%H:%M:%S)"

mkdir -p "$OUT"
out=$(cd "$OUT" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tarballs=()
for arch in $ARCHES; do
  name=pleg_exporter-$version.linux-$arch
  dir=$stage/$name
  mkdir -p "$dir/mixin" "$dir/dashboards"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$dir/pleg_exporter" ./cmd/pleg_exporter
  cp LICENSE README.md CHANGELOG.md "$dir/"
  cp mixin/generated/prometheus_alerts.yaml mixin/generated/prometheus_rules.yaml "$dir/mixin/"
  cp dashboards/pleg-fleet.json dashboards/pleg-node.json "$dir/dashboards/"
  chmod 0755 "$dir/pleg_exporter"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode='u+rwX,go+rX,go-w' \
    --format=gnu -C "$stage" -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
  tarballs+=("$name.tar.gz")
done
(cd "$out" && sha256sum "${tarballs[@]}" > sha256sums.txt)
echo "make release: ${tarballs[*]} and sha256sums.txt in $OUT (commit ${revision:0:12})"
