#!/usr/bin/env bash
# Print the path of a containers.conf whose default rlimits podman can actually set here.
# podman (as root) gives every container nofile=1048576 and a large nproc; inside a container
# or under a capped login those are above this process's hard limits and runc fails every start
# with "error setting rlimit type 7: operation not permitted". The file keeps podman's other
# defaults and sets nofile to this shell's hard limit, nproc to at most 4096 (counted per uid
# across the stack's containers, which all run as uid 10001). An existing CONTAINERS_CONF wins.
set -euo pipefail
if [[ -n "${CONTAINERS_CONF:-}" ]]; then echo "$CONTAINERS_CONF"; exit 0; fi
dir="${1:-build/podman}"
mkdir -p "$dir"
nofile="$(ulimit -Hn)"; [[ $nofile == unlimited ]] && nofile=1048576
nproc="$(ulimit -Su)"; [[ $nproc == unlimited || $nproc -gt 4096 ]] && nproc=4096
conf="$(cd "$dir" && pwd)/containers.conf"
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$nofile" "$nofile" "$nproc" "$nproc" > "$conf"
echo "$conf"
