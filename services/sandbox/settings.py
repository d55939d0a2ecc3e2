"""Sandbox settings, read once from ``TTC_SANDBOX_*`` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SandboxSettings(BaseSettings):
    """Where the sandbox listens, how much it runs at once, and the limits it allows."""

    model_config = SettingsConfigDict(env_prefix="TTC_SANDBOX_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the sandbox gRPC server binds.")
    backend: Literal["bwrap", "docker"] = Field(
        "bwrap",
        description=(
            "Where programs run: 'bwrap' (bubblewrap namespaces on this host) or 'docker' (a fresh container per "
            "execution through the Docker API, Docker's or podman's; docs/sandbox.md). No fallback between them."
        ),
    )
    port: int = Field(50053, description="Sandbox gRPC port.")
    metrics_port: int = Field(9103, description="Port of the sandbox's Prometheus /metrics endpoint.")

    max_concurrency: int = Field(4, ge=1, le=64, description="Executions that run at the same time.")
    max_queue: int = Field(
        64, ge=0, description="Requests that may wait for a free slot; beyond that Execute is RESOURCE_EXHAUSTED."
    )
    uid_base: int = Field(
        60000,
        ge=1000,
        description=(
            "When the service runs as root: slot i runs its programs as host uid uid_base+i (no passwd entry "
            "needed), so code never runs as root and each slot's processes are told apart. Use distinct ranges "
            "for services sharing a host."
        ),
    )

    default_cpu_seconds: float = Field(5.0, gt=0, description="CPU-time limit when a request sets none.")
    default_wall_seconds: float = Field(10.0, gt=0, description="Wall-clock limit when a request sets none.")
    default_memory_bytes: int = Field(
        512 * 1024 * 1024,
        gt=0,
        description=(
            "Memory limit when a request sets none: RLIMIT_AS of each process, and (with memory cgroups) the "
            "whole execution's memory beyond its tmpfs."
        ),
    )
    default_max_processes: int = Field(32, gt=0, description="Processes and threads per execution when unset.")
    default_max_output_bytes: int = Field(
        1024 * 1024, gt=0, description="Bytes kept of stdout and of stderr each when a request sets none."
    )
    max_cpu_seconds: float = Field(60.0, gt=0, description="Largest CPU-time limit a request may ask for.")
    max_wall_seconds: float = Field(120.0, gt=0, description="Largest wall-clock limit a request may ask for.")
    max_memory_bytes: int = Field(4 * 1024 * 1024 * 1024, gt=0, description="Largest memory limit a request may ask.")
    max_processes: int = Field(256, gt=0, description="Largest process limit a request may ask for.")
    max_output_bytes: int = Field(16 * 1024 * 1024, gt=0, description="Largest output limit a request may ask for.")

    tmpfs_bytes: int = Field(
        64 * 1024 * 1024, gt=0, description="Size of each execution's private writable tmpfs (/tmp, the cwd)."
    )
    max_open_files: int = Field(64, gt=3, description="RLIMIT_NOFILE inside the sandbox.")
    max_code_bytes: int = Field(1024 * 1024, gt=0, description="Largest program (code field) accepted.")
    max_payload_bytes: int = Field(
        8 * 1024 * 1024, gt=0, description="Largest total of code, stdin, files and tests in one request."
    )
    max_files: int = Field(64, ge=0, description="Most extra files one request may carry.")
    max_tests: int = Field(256, ge=0, description="Most test cases one request may carry.")

    memory_cgroup: str = Field(
        "auto",
        description=(
            "Parent directory for per-slot memory cgroups (one limit for an execution's whole process tree): "
            "'auto' uses this process's own memory cgroup (v1, or v2 with memory delegated) and refuses to "
            "start when it may not; a directory delegated to the service's user works without root; 'off' "
            "accepts RLIMIT_AS per process only."
        ),
    )

    site_packages: bool = Field(
        False,
        description=(
            "Also show programs the interpreter's site/dist-packages (read-only); off, they see the standard "
            "library only."
        ),
    )

    bwrap_path: str = Field("/usr/bin/bwrap", description="The bubblewrap binary.")
    prlimit_path: str = Field("/usr/bin/prlimit", description="util-linux prlimit, which sets the rlimits.")
    setpriv_path: str = Field(
        "/usr/bin/setpriv", description="util-linux setpriv, which switches to the slot's uid (when root)."
    )
    python_path: str = Field(
        "/usr/bin/python3",
        description=(
            "Interpreter run inside the sandbox; it, its standard library and libpython are bound read-only, so "
            "they must be readable by the slot uids (a pyenv under /root is not)."
        ),
    )

    docker_url: str = Field(
        "unix:///var/run/docker.sock",
        description=(
            "Docker API of the docker backend (podman: `podman system service unix://...`). Whoever holds this "
            "socket is root on its host: give it to the sandbox service only."
        ),
    )
    docker_image: str = Field(
        "ttc-sandbox:latest",
        description="Image of the docker backend's containers, built locally by scripts/build_sandbox_image.sh.",
    )
    docker_python: str = Field("/usr/bin/python3", description="Interpreter inside the docker backend's image.")
    docker_cpus: float = Field(1.0, gt=0, description="CPUs each docker-backend container may use (CFS quota).")
    docker_instance: str = Field(
        "", description="Label value naming this service's containers (empty: a random id per start)."
    )
    docker_sweep_seconds: float = Field(
        30.0, gt=0, description="How often the docker backend removes orphaned containers (also once at start)."
    )
    docker_api_timeout: float = Field(60.0, gt=0, description="Seconds one Docker API call may take.")
