#!/usr/bin/env bash
# Build the docker sandbox backend's image (default ttc-sandbox:latest) from Debian packages,
# with no registry: mmdebstrap makes a root filesystem of the host's Debian release with
# python3, it is cut down to /usr (and the merged-/usr links), and imported as an image.
# The image has no shell entrypoint, no package manager state and no /etc of its own; the
# sandbox service runs its own init (services/sandbox/container_init.py) as a non-root uid.
#
#   scripts/build_sandbox_image.sh [--force] [TAG]
#
# CONTAINER_CLI picks podman or docker (default: podman if installed, else docker); the same
# build works with either. The root filesystem is cached as a tarball under
# ${TTC_SANDBOX_ROOTFS_CACHE:-/var/cache/ttc} so a rebuild of the image skips mmdebstrap.
set -euo pipefail

force=0
if [[ "${1:-}" == "--force" ]]; then force=1; shift; fi
tag="${1:-ttc-sandbox:latest}"
cli="${CONTAINER_CLI:-$(command -v podman >/dev/null && echo podman || echo docker)}"
# Extra global options of the CLI, e.g. "--runtime runc" where crun refuses the host's cgroups.
read -r -a cli_flags <<<"${CONTAINER_CLI_FLAGS:-}"
cli=("$cli" "${cli_flags[@]}")

if [[ $force == 0 ]] && "${cli[@]}" image inspect "$tag" >/dev/null 2>&1; then
    echo "image $tag already present (${cli[*]})"
    exit 0
fi

. /etc/os-release
suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
cache="${TTC_SANDBOX_ROOTFS_CACHE:-/var/cache/ttc}"
rootfs="$cache/sandbox-rootfs-$suite-$(dpkg --print-architecture).tar"
mkdir -p "$cache"

if [[ $force == 1 || ! -s "$rootfs" ]]; then
    command -v mmdebstrap >/dev/null || { echo "mmdebstrap missing: apt-get install mmdebstrap" >&2; exit 1; }
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    echo "mmdebstrap $suite (python3) -> $rootfs"
    mmdebstrap --quiet --variant=essential --include=python3 \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$suite" "$work/full"
    mkdir "$work/slim" "$work/slim/dev" "$work/slim/proc"
    mkdir -m 1777 "$work/slim/tmp"
    cp -a "$work/full/usr" "$work/slim/"
    for link in bin sbin lib lib64; do
        if [[ -L "$work/full/$link" ]]; then cp -a "$work/full/$link" "$work/slim/"; fi
    done
    tar --numeric-owner -C "$work/slim" -cf "$rootfs.part" .
    mv "$rootfs.part" "$rootfs"
fi

echo "importing $rootfs as $tag (${cli[*]})"
"${cli[@]}" import \
    --change 'USER 65534:65534' \
    --change 'WORKDIR /tmp' \
    --change 'ENV PATH=/usr/bin:/bin LANG=C.UTF-8' \
    --change 'CMD ["/usr/bin/python3"]' \
    --change 'LABEL org.opencontainers.image.title=ttc-sandbox' \
    "$rootfs" "$tag" >/dev/null
"${cli[@]}" run --rm --network none --read-only --user 65534:65534 \
    --ulimit nofile=64:64 --ulimit nproc=64:64 "$tag" \
    /usr/bin/python3 -I -S -c 'import json, math, hashlib, ctypes; print("sandbox image ok")' ||
    echo "warning: could not test-run $tag with $cli run (the image is imported)" >&2
echo "built $tag"
