#!/usr/bin/env bash
# The test run of `make test`, after the installs and the lint: every
# package's tests, then the packages that run the real kubelet (the harness
# and the end-to-end test), whose build (started in the background by `make
# kubelet-background`) it waits for in between.
#
# Verbose, so the figures the tests measure (payload bytes, freeze and
# recovery times, alert lead times) land in CI's log; the per-test RUN/PASS
# chatter is dropped, skips and failures are kept.
set -uo pipefail
: "${GO:=go}" "${TEST_TIMEOUT:=25m}"
: "${KUBELET:?}" "${CRICTL:?}" "${CONTAINERD2:?}" "${HELM:?}"
export CRICTL KUBELET CONTAINERD2 HELM

filter() { grep --line-buffered -v -E '^(=== (RUN|PAUSE|CONT|NAME) |[[:space:]]*--- PASS: |PASS$)'; }
gotest() { "$GO" test -p 1 -count=1 -v -timeout "$TEST_TIMEOUT" "$@" | filter; }

module=github.com/pleg-exporter/pleg_exporter
kubelet_pkgs=("$module/internal/testenv" "$module/internal/e2e")
mapfile -t pkgs < <("$GO" list ./... | grep -v -x -F "${kubelet_pkgs[@]/#/-e}")
gotest "${pkgs[@]}"
rc=$?

# The kubelet: wait for its build if one runs.
pidfile=$KUBELET.pid
if [ -f "$pidfile" ]; then
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    echo "make test: waiting for the kubelet's build (log: $KUBELET.log)"
    while kill -0 "$pid" 2>/dev/null; do sleep 2; done
  fi
  rm -f "$pidfile"
fi
if [ ! -x "$KUBELET" ]; then
  reason="the kubelet did not build: $(tail -n 1 "$KUBELET.log" 2>/dev/null || echo "no build log")"
  echo "make test: $reason (log: $KUBELET.log)"
  if [ -n "${CI:-}" ]; then
    tail -n 30 "$KUBELET.log" 2>/dev/null
    exit 1
  fi
  # The kubelet's tests skip with this reason.
  export KUBELET_UNAVAILABLE=$reason
fi
gotest "${kubelet_pkgs[@]}" || rc=1
exit $rc
