#!/usr/bin/env bash
# Build the core profile's images (docker-compose.yml) from one setting, and write the env file
# that points compose at them:
#
#   TTC_IMAGE_SOURCE=debian scripts/build_core_images.sh   # no registry: Debian + PyPI only
#   TTC_IMAGE_SOURCE=registry scripts/build_core_images.sh # python:3.11-slim, redis, prom images
#
# Prints the env file's path on its last line (build/compose-<source>.env); use it with
# `podman-compose --env-file FILE up` or `docker compose --env-file FILE up`.
#
# debian: scripts/build_debian_images.sh imports the bases from mmdebstrap root filesystems
# (python, redis-server, prometheus), scripts/build_wheelhouse.sh builds the wheels once per
# requirements.lock (llama.cpp compiled once with the portable flags, ISA-checked), and each
# role of docker/Dockerfile is built on the Python base with that folder mounted read-only
# (--build-arg WHEELHOUSE): no registry, no index, no compiler in the build.
# registry: the Dockerfile's defaults and the compose file's registry images, as before.
#
# Images are tagged ttc-serve/<role>:<source> and always built: the builder's layer cache
# keeps every layer whose inputs did not change (so an unchanged tree rebuilds in seconds), and
# a changed base, Dockerfile or source tree can never leave a stale image behind (it once did:
# a policy image without libgomp1 outlived the fix). FORCE=1 builds without the cache. EMBEDDED_MODELS (default: both embedded models) picks the GGUFs baked into policy-cpu.
# podman needs the CLI's default rlimits to fit this host's (scripts/podman_limits_conf.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

source="${TTC_IMAGE_SOURCE:-debian}"
cli="${CONTAINER_CLI:-$(command -v podman >/dev/null && echo podman || echo docker)}"
if [[ $cli == *podman* ]]; then
    CONTAINERS_CONF="$(scripts/podman_limits_conf.sh)"
    export CONTAINERS_CONF
fi
. /etc/os-release
suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
roles=(gateway orchestrator verifier sandbox policy-cpu)
build_args=()
volumes=()
# podman writes OCI images by default, which drop the Dockerfile's HEALTHCHECKs; keep them.
if [[ $cli == *podman* ]]; then build_args+=(--format docker); fi
case "$source" in
    debian)
        # docker build cannot mount a folder into RUN steps; podman (buildah) can.
        [[ $cli == *podman* ]] || { echo "TTC_IMAGE_SOURCE=debian builds with podman (CONTAINER_CLI=$cli)" >&2; exit 2; }
        scripts/build_debian_images.sh $([[ "${FORCE:-0}" == 1 ]] && echo --force)
        python_image="localhost/ttc-serve/python-debian:$suite"
        house="$(TTC_WHEELHOUSE_PYTHON_IMAGE="$python_image" scripts/build_wheelhouse.sh | tail -n 1)"
        build_args+=(--build-arg "PYTHON_IMAGE=$python_image" --build-arg WHEELHOUSE=/wheels)
        volumes+=(-v "$house:/wheels:ro")
        redis_image="localhost/ttc-serve/redis-debian:$suite"
        prometheus_image="localhost/ttc-serve/prometheus-debian:$suite"
        ;;
    registry)
        python_image="python:3.11-slim-bookworm"
        redis_image="redis:7.4-alpine"
        prometheus_image="prom/prometheus:v2.55.1"
        ;;
    *)
        echo "TTC_IMAGE_SOURCE must be debian or registry, not '$source'" >&2
        exit 2
        ;;
esac
if [[ -n "${EMBEDDED_MODELS:-}" ]]; then build_args+=(--build-arg "EMBEDDED_MODELS=$EMBEDDED_MODELS"); fi

for role in "${roles[@]}"; do
    tag="ttc-serve/$role:$source"
    echo "building $tag ($cli)" >&2
    start=$SECONDS
    cache=()
    if [[ "${FORCE:-0}" == 1 ]]; then cache=(--no-cache); fi
    # podman alone can mount a folder into RUN steps; docker gets the wheels only from a registry build.
    "$cli" build -f docker/Dockerfile --target "$role" -t "$tag" "${cache[@]}" "${build_args[@]}" "${volumes[@]}" . >&2
    echo "built $tag in $((SECONDS - start)) s" >&2
done

mkdir -p build
env_file="build/compose-$source.env"
cat > "$env_file" <<ENV
# Written by scripts/build_core_images.sh (TTC_IMAGE_SOURCE=$source): the core profile's images.
TTC_IMAGE_TAG=$source
PYTHON_IMAGE=$python_image
TTC_REDIS_IMAGE=$redis_image
TTC_PROMETHEUS_IMAGE=$prometheus_image
ENV
echo "$env_file"
