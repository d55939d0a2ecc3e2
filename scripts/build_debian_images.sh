#!/usr/bin/env bash
# Build the core profile's base images from Debian packages alone, with no registry, the way
# scripts/build_sandbox_image.sh builds the sandbox backend's image: mmdebstrap makes a root
# filesystem of the host's Debian release and `podman import` (or docker's) turns it into an
# image. Three images, each tagged <name>:<suite>:
#
#   ttc-serve/python-debian      python3 + venv, bubblewrap, util-linux (prlimit), passwd, and
#                                binutils (objdump, for scripts/check_engine_isa.py): the base
#                                docker/Dockerfile builds every ttc-serve role on
#                                (--build-arg PYTHON_IMAGE=...) in place of python:3.11-slim
#   ttc-serve/redis-debian       redis-server + redis-cli, in place of redis:7.4-alpine
#   ttc-serve/prometheus-debian  prometheus (+ wget for the healthcheck), in place of
#                                prom/prometheus; entrypoint /bin/prometheus, as in that image
#
#   scripts/build_debian_images.sh [--force]
#
# Root filesystems are cached as tarballs under ${TTC_ROOTFS_CACHE:-/var/cache/ttc}, keyed by
# the suite and the package list, so re-importing skips mmdebstrap. CONTAINER_CLI picks the CLI.
set -euo pipefail

force=0
if [[ "${1:-}" == "--force" ]]; then force=1; shift; fi
cli="${CONTAINER_CLI:-$(command -v podman >/dev/null && echo podman || echo docker)}"
. /etc/os-release
suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
cache="${TTC_ROOTFS_CACHE:-/var/cache/ttc}"
mkdir -p "$cache"

# build NAME PACKAGES HOOK CHANGE...: one image from one cached root filesystem.
build() {
    local name="$1" packages="$2" hook="$3"
    shift 3
    local tag="ttc-serve/$name:$suite"
    local key rootfs present
    # The image is kept only when it was imported from these inputs (its ttc.inputs label): a
    # changed package list (libgomp1 and tzdata were added once) must not leave the old image.
    # One label per --change: podman 4.3's import reads "LABEL a=1 b=2" as one label a="1 b=2".
    key="$(printf '%s\n' "$suite" "$packages" "$hook" "$@" | sha256sum | cut -c1-12)"
    present="$("$cli" image inspect --format '{{index .Config.Labels "ttc.inputs"}}' "$tag" 2>/dev/null || true)"
    if [[ $force == 0 && "$present" == "$key" ]]; then
        echo "image $tag already present, built from these inputs ($cli)" >&2
        return
    fi
    rootfs="$cache/$name-rootfs-$suite-$(dpkg --print-architecture)-$key.tar"
    if [[ $force == 1 || ! -s "$rootfs" ]]; then
        command -v mmdebstrap >/dev/null || { echo "mmdebstrap missing: apt-get install mmdebstrap" >&2; exit 1; }
        echo "mmdebstrap $suite ($packages) -> $rootfs" >&2
        mmdebstrap --quiet --variant=essential --include="$packages" \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
            --customize-hook="$hook" \
            --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
            "$suite" "${rootfs%.tar}.part.tar"
        mv "${rootfs%.tar}.part.tar" "$rootfs"
    fi
    local changes=()
    for change in "$@"; do changes+=(--change "$change"); done
    echo "importing $rootfs as $tag ($cli)" >&2
    "$cli" import "${changes[@]}" \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
        --change "LABEL org.opencontainers.image.title=$name" --change "LABEL org.opencontainers.image.source=debian-$suite" \
        --change "LABEL ttc.inputs=$key" \
        "$rootfs" "$tag" >/dev/null
    echo "built $tag" >&2
}

# The Dockerfile's sandbox stage points the sandbox at /usr/local/bin/python3 (the registry
# image's interpreter): here that is Debian's. libgomp1: llama.cpp's CPU library links OpenMP;
# tzdata: kombu (the orchestrator's Celery) reads the UTC zone at import.
build python-debian \
    python3,python3-venv,python-is-python3,ca-certificates,bubblewrap,util-linux,passwd,binutils,libgomp1,tzdata \
    'ln -sf /usr/bin/python3 "$1/usr/local/bin/python3"; ln -sf /usr/bin/python3 "$1/usr/local/bin/python"' \
    'CMD ["/usr/bin/python3"]'

build redis-debian redis-server \
    'mkdir -p "$1/data"' \
    'WORKDIR /data' 'CMD ["redis-server"]'

# nobody, as in prom/prometheus; its working directory holds the TSDB (data/).
build prometheus-debian prometheus,wget \
    'mkdir -p "$1/prometheus" && chown 65534:65534 "$1/prometheus"' \
    'USER 65534:65534' 'WORKDIR /prometheus' 'ENTRYPOINT ["/bin/prometheus"]' \
    'CMD ["--config.file=/etc/prometheus/prometheus.yml"]'
