#!/usr/bin/env bash
# Installs, from Debian's packages, the real components the tests and the
# private runtimes need, when they are missing. Needs root (CI runs as root).
# Usage: scripts/install-deps.sh [group...]  groups: runtime docker prometheus tools kubelet
set -euo pipefail

declare -A pkg_of=(
  [containerd]=containerd [runc]=runc [ctr]=containerd [busybox]=busybox-static [chattr]=e2fsprogs
  [dockerd]=docker.io [docker]=docker.io
  [promtool]=prometheus [prometheus]=prometheus
  [prometheus-alertmanager]=prometheus-alertmanager [amtool]=prometheus-alertmanager
  [strace]=strace [systemd-analyze]=systemd [ip]=iproute2 [qemu-aarch64-static]=qemu-user-static
)
declare -A group_bins=(
  [runtime]="containerd runc ctr busybox chattr"
  [docker]="dockerd docker"
  [prometheus]="promtool prometheus prometheus-alertmanager amtool"
  [tools]="strace systemd-analyze qemu-aarch64-static"
  [kubelet]="ip"
)

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(runtime docker prometheus tools kubelet)

missing=()
for g in "${groups[@]}"; do
  for b in ${group_bins[$g]}; do
    if ! command -v "$b" >/dev/null 2>&1; then
      missing+=("${pkg_of[$b]}")
    fi
  done
done
# busybox from the busybox package is dynamic; the image needs the static one.
if [[ " ${groups[*]} " == *" runtime "* ]] && ! dpkg -s busybox-static >/dev/null 2>&1; then
  missing+=(busybox-static)
fi
# The kubelet's pods with a network of their own: bridge + host-local.
if [[ " ${groups[*]} " == *" kubelet "* ]] && [ ! -x /usr/lib/cni/bridge ]; then
  missing+=(containernetworking-plugins)
fi
[ ${#missing[@]} -gt 0 ] || exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (sudo make deps) or install them with apt-get" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# The packages' own services are not started here: policy-rc.d refuses, so
# no system containerd or dockerd comes up beside the private ones.
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; created_policy=1
fi
trap '[ -n "$created_policy" ] && rm -f "$policy"' EXIT
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
