#!/usr/bin/env bash
# Install the Debian packages the services and tests need, if any is missing:
# redis-server (queues, events, traces), bubblewrap (sandbox isolation), prometheus
# (promtool for alert rules), chromium (report and trace-viewer screenshot tests), and the
# Debian python3 plus util-linux (prlimit, setpriv) that sandboxed programs run with; podman
# (its Docker-compatible API serves the sandbox's docker backend in the tests), runc (crun, podman's
# default, refuses hosts with cgroup v1 and a v2 hierarchy holding controllers) and mmdebstrap
# (builds the sandbox image from Debian packages: scripts/build_sandbox_image.sh).
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v promtool >/dev/null || need+=(prometheus)
command -v chromium >/dev/null || need+=(chromium)
[ -x /usr/bin/python3 ] || need+=(python3)
command -v prlimit >/dev/null && command -v setpriv >/dev/null || need+=(util-linux)
command -v podman >/dev/null || need+=(podman containernetworking-plugins)
command -v runc >/dev/null || need+=(runc)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
[ ${#need[@]} -eq 0 ] && exit 0

echo "installing system packages: ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q || true
$sudo apt-get install -y -q --no-install-recommends "${need[@]}"
# Debian starts the packaged daemons; the project starts its own on private ports.
for svc in redis-server prometheus; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
    $sudo systemctl stop "$svc" || true
  fi
done
