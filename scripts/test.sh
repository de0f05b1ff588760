#!/usr/bin/env bash
# The test run of `make test`, after the installs and the lint: the packages
# that run the real kubelet (the harness and the end-to-end test), the
# integration tests, the chart's (deploy, with Helm) and every other
# package's, the four groups at once, each after the build it needs (started
# in the background by make test).
#
# Verbose, so the figures the tests measure (payload bytes, freeze and
# recovery times, alert lead times) land in CI's log; the per-test RUN/PASS
# chatter is dropped, skips and failures are kept.
set -uo pipefail
: "${GO:=go}" "${TEST_TIMEOUT:=25m}"
: "${KUBERNETES:?}" "${KUBELET:?}" "${KUBECTL:?}" "${ETCD:?}" "${PROMETHEUS_OPERATOR:?}" "${PROMETHEUS_SERVER:?}" "${KUBE_STATE_METRICS:?}" "${CRICTL:?}" "${CONTAINERD2:?}" "${CONTAINERD17:?}" "${HELM:?}" "${THANOS:?}"
export CRICTL KUBERNETES KUBELET KUBECTL ETCD PROMETHEUS_OPERATOR PROMETHEUS_SERVER KUBE_STATE_METRICS CONTAINERD2 CONTAINERD17 HELM THANOS

# hostcheck records the host (the sysctls the kubelet and the bridge plugin
# touch, mounts, cgroups, network interfaces, the fixed host paths and the
# harness's daemon records) before the first daemon starts, and compares it
# after the last one stops: a difference fails the run, named line by line.
mkdir -p .build
hostcheck=.build/hostcheck
host_before=.build/host-before.json
"$GO" build -o "$hostcheck" ./internal/cmd/hostcheck || exit 1
"$hostcheck" save "$host_before" || exit 1
host_check() {
  "$hostcheck" compare "$host_before" || rc=1
}

# -a: the tests print runtime-supplied bytes (the hostile-name tests' invalid
# UTF-8); without it grep calls the stream binary in a UTF-8 locale, stops
# printing, and go test dies of SIGPIPE, a failure with its output lost.
filter() { grep -a --line-buffered -v -E '^(=== (RUN|PAUSE|CONT|NAME) |[[:space:]]*--- PASS: |PASS$)'; }
gotest() { "$GO" test -p 1 -count=1 -v -timeout "$TEST_TIMEOUT" "$@" | filter; }

module=github.com/pleg-exporter/pleg_exporter
integration_pkgs=("$module/internal/integration")
helm_pkgs=("$module/deploy")
kubelet_pkgs=("$module/internal/testenv" "$module/internal/e2e")
cluster_pkgs=("$module/internal/cluster")
fleet_pkgs=("$module/internal/fleet")
others=("${integration_pkgs[@]}" "${helm_pkgs[@]}" "${kubelet_pkgs[@]}" "${cluster_pkgs[@]}" "${fleet_pkgs[@]}")
mapfile -t pkgs < <("$GO" list ./... | grep -v -x -F "${others[@]/#/-e}")

# wait_build BIN [JOB]: wait until BIN is there or the background build job
# JOB (default BIN) that makes it has ended (make test starts it, with
# JOB.pid and JOB.log; a job may go on to build more); true when BIN is
# there. The builds move each binary into place whole.
wait_build() {
  local bin=$1 job=${2:-$1} pid
  if [ ! -x "$bin" ] && [ -f "$job.pid" ]; then
    pid=$(cat "$job.pid" 2>/dev/null)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      echo "make test: waiting for the build of $(basename "$bin") (log: $job.log)"
      while [ ! -x "$bin" ] && kill -0 "$pid" 2>/dev/null; do sleep 2; done
    fi
  fi
  [ -x "$bin" ]
}

# Four groups run at once, each package after the other within a group (-p
# 1): the kubelet's packages (the harness and the end-to-end test, which
# mostly wait on the kubelet's real 3-minute threshold), the integration
# tests (which mostly wait on the daemons they drive), the other packages,
# and the chart's (with Helm). Only the kubelet's packages run a kubelet, so
# two kubelets never run at once; every other daemon has its own directory
# and socket. The kubelet's output streams; the others' is held and printed
# after it, one group after another, so the log reads one package after
# another.
held_integration=$(mktemp) held_others=$(mktemp) held_helm=$(mktemp)
gotest "${integration_pkgs[@]}" > "$held_integration" 2>&1 &
integration_pid=$!
gotest "${pkgs[@]}" > "$held_others" 2>&1 &
others_pid=$!
# Without Helm (or kubectl, built with the kubelet) the chart's tests fail in
# CI and skip elsewhere.
{
  if ! wait_build "$HELM"; then
    echo "make test: Helm did not build: $(tail -n 1 "$HELM.log" 2>/dev/null || echo "no build log") (log: $HELM.log)"
    [ -n "${CI:-}" ] && tail -n 30 "$HELM.log" 2>/dev/null
    unset HELM
  fi
  if ! wait_build "$KUBECTL" "$KUBERNETES"; then
    echo "make test: kubectl did not build (log: $KUBERNETES.log)"
    unset KUBECTL
  fi
  gotest "${helm_pkgs[@]}" || status=1
  # The fleet's Prometheus and Thanos, once Thanos is built (after Helm).
  if ! wait_build "$THANOS" "$HELM"; then
    echo "make test: Thanos did not build: $(tail -n 1 "$HELM.log" 2>/dev/null || echo "no build log") (log: $HELM.log)"
    [ -n "${CI:-}" ] && tail -n 30 "$HELM.log" 2>/dev/null
    unset THANOS
  fi
  gotest "${fleet_pkgs[@]}" || status=1
  # fleetbench, a module of its own, outside ./...: its unit tests only.
  (cd internal/cmd/fleetbench && gotest .) || status=1
  exit "${status:-0}"
} > "$held_helm" 2>&1 &
helm_pid=$!
# held_done PID FILE: wait for a held group, then print its output.
held_done() {
  wait "$1" || rc=1
  cat "$2"
  rm -f "$2"
}
finish() {
  held_done "$integration_pid" "$held_integration"
  held_done "$others_pid" "$held_others"
  held_done "$helm_pid" "$held_helm"
  host_check
  exit $rc
}

# The kubelet: its packages start as soon as it is built (at once on a
# machine that built it before).
rc=0
if ! wait_build "$KUBELET" "$KUBERNETES"; then
  reason="the kubelet did not build: $(tail -n 1 "$KUBERNETES.log" 2>/dev/null || echo "no build log")"
  echo "make test: $reason (log: $KUBERNETES.log)"
  if [ -n "${CI:-}" ]; then
    tail -n 30 "$KUBERNETES.log" 2>/dev/null
    rc=1
    finish
  fi
  # The kubelet's tests skip with this reason.
  export KUBELET_UNAVAILABLE=$reason
fi
gotest -skip 'ControlPlane' "${kubelet_pkgs[@]}" || rc=1
# The control plane after the kubelet's tests: its build goes on beside them.
if ! { wait_build "$KUBERNETES/kube-scheduler" "$KUBERNETES" && wait_build "$ETCD" "$KUBERNETES"; }; then
  echo "make test: the control plane did not build (log: $KUBERNETES.log)"
  if [ -n "${CI:-}" ]; then
    tail -n 30 "$KUBERNETES.log" 2>/dev/null
    rc=1
  fi
fi
gotest -run 'ControlPlane' "$module/internal/testenv" || rc=1
# The cluster's tests (a kubelet too, so after the others) install the chart
# with Helm beside the Prometheus Operator.
wait_build "$HELM" || echo "make test: Helm did not build (log: $HELM.log)"
wait_build "$PROMETHEUS_OPERATOR/prometheus-config-reloader" "$KUBERNETES" || echo "make test: the Prometheus Operator did not build (log: $KUBERNETES.log)"
wait_build "$PROMETHEUS_SERVER" "$KUBERNETES" || echo "make test: Prometheus did not build (log: $KUBERNETES.log)"
wait_build "$KUBE_STATE_METRICS" "$KUBERNETES" || echo "make test: kube-state-metrics did not build (log: $KUBERNETES.log)"
gotest "${cluster_pkgs[@]}" || rc=1
finish
