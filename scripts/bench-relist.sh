#!/usr/bin/env bash
# The relist's list part (pleg_relist_last_duration_seconds) of this tree beside a
# base revision, on a private containerd of 3,000 containers (root), then the
# same in process (BenchmarkRelistFeatures, answers replayed), alternated.
# make bench-relist runs it; docs/benchmarks.md "The list part since the
# lister refactor" says how to read it.
#
#   RELIST_BASE=68f43d9 ROUNDS=5 RELISTS=20 scripts/bench-relist.sh
set -euo pipefail
GO=${GO:-go}
BASE=${RELIST_BASE:-68f43d9} # the commit before the lister refactor (b43e6c0)
ROUNDS=${ROUNDS:-5}
RELISTS=${RELISTS:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/base"
git archive "$BASE" | tar -x -C "$work/base"
(cd "$work/base" && CGO_ENABLED=0 $GO build -trimpath -o "$work/exporter-base" ./cmd/pleg_exporter)
CGO_ENABLED=0 $GO build -trimpath -o "$work/exporter-tree" ./cmd/pleg_exporter
$GO build -o "$work/listbench" ./internal/cmd/listbench

# Whole processes against the real runtime; the answers are kept for the
# in-process benchmark below.
"$work/listbench" --dir "$work/containerd" --dump "$work/answers" --rounds "$ROUNDS" --relists "$RELISTS" \
	--bin "tree=$work/exporter-tree" --bin "$BASE=$work/exporter-base"

# The exporter's side alone: the same answer bytes replayed, both trees'
# relist (the base's package was collector/cri), alternated.
$GO test -c -o "$work/tree.test" ./runtime/cri/
sed 's#pleg_exporter/runtime/cri"#pleg_exporter/collector/cri"#' runtime/cri/relist_bench_test.go \
	>"$work/base/collector/cri/relist_bench_test.go"
(cd "$work/base" && $GO test -c -o "$work/base.test" ./collector/cri/)
echo
echo "BenchmarkRelistFeatures, answers replayed, medians of $ROUNDS alternated runs:"
for i in $(seq "$ROUNDS"); do
	for t in tree base; do
		CRI_BENCH_ANSWERS="$work/answers" "$work/$t.test" -test.run '^$' -test.bench RelistFeatures -test.benchtime 40x |
			awk -v t="$t" '/^Benchmark/ { for (i = 1; i <= NF; i++) { if ($i == "list-ns/op") l = $(i-1); if ($i == "cpu-ns/op") c = $(i-1) }; print t, l, c }'
	done
done >"$work/go.out"
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2) / 1e6 }'; }
for t in tree base; do
	echo "$t: list part $(awk -v t="$t" '$1 == t { print $2 }' "$work/go.out" | median) ms," \
		"process CPU $(awk -v t="$t" '$1 == t { print $3 }' "$work/go.out" | median) ms per relist"
done
