#!/usr/bin/env bash
# make test-kubelets: TestCluster (a real control plane, the chart through
# Helm, the Prometheus Operator, the freeze and the overflow against the
# Node object, gc) against each kubelet version, runtime and gates the field
# runs, one after another (two kubelets never run at once). Each run records
# its series and alerts (stack.Recording); the recording must match the one
# committed in testdata/kubelets for that cell, which make test replays
# through the rendered mixin. A cell recorded for the first time, or with
# RECORD_UPDATE=1, is written there.
#
# Usage: scripts/test-kubelets.sh CELL...   CELL: VERSION:RUNTIME:GATES, e.g.
#   v1.36.3:v1.7.35:EventedPLEG=true   (RUNTIME: a containerd build, or "debian";
#   GATES: comma-separated, or "default")
set -uo pipefail
: "${GO:=go}" "${KUBERNETES:?}" "${CONTAINERD2:?}" "${CONTAINERD17:?}"
CURDIR_ABS=$(pwd)
out=.build/kubelets
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
rc=0
for cell in "$@"; do
  IFS=: read -r version runtime gates <<< "$cell"
  if [ -z "$version" ] || [ -z "$runtime" ] || [ -z "$gates" ]; then
    echo "test-kubelets: $cell: want VERSION:RUNTIME:GATES" >&2
    exit 2
  fi
  dir=.tools/kubernetes-$version
  # The pinned version's kubelet is make test's; the others are built here.
  if ! GO=$GO bash scripts/build-kubernetes.sh "$version" "$dir" kubelet; then
    echo "test-kubelets: $cell: the kubelet $version did not build (its staging modules are v0.${version#v1.}; the error above names the missing one)" >&2
    rc=1
    continue
  fi
  [ "$runtime" = debian ] && runtime=
  [ "$gates" = default ] && gates=
  name=${cell//[:=,]/_}
  live=$CURDIR_ABS/$out/$name.yaml
  log=$out/$name.log
  echo "test-kubelets: $cell: TestCluster (log: $log)"
  start=$(date +%s)
  CI=1 KUBELET=$CURDIR_ABS/$dir/kubelet PLEG_KUBELET_GATES=$gates PLEG_CLUSTER_CONTAINERD=$runtime \
    PLEG_RECORD_KUBELET=$live "$GO" test -count=1 -v -timeout 60m -run 'TestCluster$' ./internal/cluster > "$log" 2>&1
  test_rc=$?
  took=$(( $(date +%s) - start ))
  if [ $test_rc -ne 0 ]; then
    echo "test-kubelets: $cell: FAILED after ${took}s:" >&2
    grep -a -E -- '--- FAIL|_test.go:[0-9]+: ' "$log" | grep -a -v -E 'kubelet log|^\s+[a-z]+\.go' | tail -20 >&2
    echo "$cell FAIL ${took}s" >> "$summary"
    rc=1
    continue
  fi
  if ! "$GO" run ./internal/cmd/recordings ${RECORD_UPDATE:+-update} "$live" testdata/kubelets; then
    echo "$cell MISMATCH ${took}s" >> "$summary"
    rc=1
    continue
  fi
  # The figures of the README's compatibility table.
  {
    echo "$cell ok ${took}s"
    grep -a -E 'paged [0-9.]+m?[0-9.]*s before T1|freeze timeline|overflow timeline|the evented health check|Node Ready again' "$log" | sed 's/^ *//'
  } >> "$summary"
done
echo "test-kubelets: summary ($summary):"
cat "$summary"
exit $rc
