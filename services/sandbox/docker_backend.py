"""The container backend's wiring: API client, readiness, the orphan sweeper, the gRPC server.

Selected by ``TTC_SANDBOX_BACKEND=docker``. It never falls back to bubblewrap: an unreachable
Docker API, a missing image or a container that cannot run ``print('ok')`` stops the service
before it serves, with the reason in the log (``DockerUnavailable``).

Trust boundary: whoever can talk to the Docker API socket can start a privileged container
and is root on that host. Only the sandbox service gets the socket; the programs it runs do
not (no mounts of it, no network, a non-root uid without capabilities).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
import uuid
from typing import Any

from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc
from services.sandbox.container_spec import EXPIRES_LABEL, INSTANCE_LABEL, LABEL, ContainerConfig
from services.sandbox.docker_executor import DockerExecutor
from services.sandbox.executor import Program
from services.sandbox.limits import resolve_limits
from services.sandbox.metrics import SandboxMetrics
from services.sandbox.pool import ExecutionPool
from services.sandbox.servicer import SandboxServicer
from services.sandbox.settings import SandboxSettings

log = logging.getLogger("services.sandbox")
BUILD_HINT = "build it with scripts/build_sandbox_image.sh (nothing is pulled from a registry)"


class DockerUnavailable(RuntimeError):
    """The container backend cannot run executions; the service must not become ready."""


def _sdk() -> Any:
    """The Docker SDK (``docker`` on PyPI); imported by name, since the repository's docker/
    directory (Dockerfiles) shadows it for the type checker."""
    return importlib.import_module("docker")


def connect(settings: SandboxSettings) -> Any:
    """A low-level API client that has answered a ping; ``DockerUnavailable`` saying why not."""
    docker = _sdk()
    try:
        api = docker.APIClient(base_url=settings.docker_url, version="auto", timeout=settings.docker_api_timeout)
        api.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, OSError
        raise DockerUnavailable(
            f"cannot reach the Docker API at {settings.docker_url} ({type(exc).__name__}: {exc}); start the "
            "Docker daemon or `podman system service`, or set TTC_SANDBOX_DOCKER_URL"
        ) from exc
    return api


def check_image(api: Any, settings: SandboxSettings) -> None:
    """The sandbox image must already be there: the service never pulls one."""
    docker = _sdk()
    try:
        api.inspect_image(settings.docker_image)
    except docker.errors.ImageNotFound as exc:
        raise DockerUnavailable(
            f"sandbox image {settings.docker_image!r} not found at {settings.docker_url}: {BUILD_HINT}"
        ) from exc
    except Exception as exc:
        raise DockerUnavailable(f"cannot inspect image {settings.docker_image!r}: {exc}") from exc


def orphans(containers: list[dict[str, Any]], now: float) -> list[str]:
    """Ids of labelled containers whose execution deadline has passed (pure)."""
    found = []
    for container in containers:
        labels = container.get("Labels") or {}
        try:
            expires = float(labels.get(EXPIRES_LABEL, "0"))
        except ValueError:
            expires = 0.0
        if expires < now:
            found.append(str(container["Id"]))
    return found


async def sweep(executor: DockerExecutor, metrics: SandboxMetrics | None = None) -> int:
    """Remove labelled containers past their deadline (left by a crashed service); how many."""
    listed = await executor.call(executor.api.containers, all=True, filters={"label": LABEL})
    removed = 0
    for container in orphans(listed, time.time()):
        with contextlib.suppress(Exception):  # removed meanwhile
            await executor.call(executor.api.remove_container, container, force=True)
            removed += 1
            if metrics is not None:
                metrics.killed("orphan")
    if removed:
        log.warning("removed %d orphaned sandbox containers", removed)
    return removed


async def remove_own(executor: DockerExecutor) -> None:
    """At shutdown: remove whatever of this instance is still there."""
    listed = await executor.call(
        executor.api.containers, all=True, filters={"label": f"{INSTANCE_LABEL}={executor.config.instance}"}
    )
    for container in listed:
        with contextlib.suppress(Exception):
            await executor.call(executor.api.remove_container, container["Id"], force=True)


async def sweeper(executor: DockerExecutor, every: float, metrics: SandboxMetrics) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            await sweep(executor, metrics)
        except Exception as exc:  # a runtime hiccup must not end the sweeper
            log.warning("orphan sweep failed: %s", exc)


async def start_executor(settings: SandboxSettings, metrics: SandboxMetrics | None = None) -> DockerExecutor:
    """Connect, check the image, sweep orphans and run one program; ``DockerUnavailable`` if any fails."""
    api = await asyncio.to_thread(connect, settings)
    await asyncio.to_thread(check_image, api, settings)
    config = ContainerConfig(
        image=settings.docker_image,
        python=settings.docker_python,
        cpus=settings.docker_cpus,
        tmpfs_bytes=settings.tmpfs_bytes,
        max_open_files=settings.max_open_files,
        instance=settings.docker_instance or uuid.uuid4().hex[:12],
    )
    on_kill = metrics.killed if metrics is not None else (lambda reason: None)
    executor = DockerExecutor(api, config, max_concurrency=settings.max_concurrency, on_kill=on_kill)
    await sweep(executor, metrics)
    outcome, message = await executor.run(Program(b"print('ok')"), resolve_limits(None, settings), settings.uid_base)
    if outcome.status != sandbox_pb2.EXEC_STATUS_OK or outcome.stdout != b"ok\n":
        executor.close()
        detail = message or outcome.stderr.decode(errors="replace")[-500:]
        raise DockerUnavailable(
            f"sandbox self-check in image {settings.docker_image!r} failed: "
            f"{sandbox_pb2.ExecStatus.Name(outcome.status)} {detail}"
        )
    log.info(
        "docker sandbox backend ready",
        extra={"image": settings.docker_image, "instance": config.instance, "self_check_seconds": outcome.wall_seconds},
    )
    return executor


async def serve_docker(settings: SandboxSettings, metrics: ServiceMetrics, sandbox_metrics: SandboxMetrics) -> None:
    """Serve ``Sandbox.Execute`` with per-execution containers."""
    executor = await start_executor(settings, sandbox_metrics)
    pool = ExecutionPool(settings.max_concurrency, settings.max_queue, settings.uid_base, sandbox_metrics.pool_changed)
    servicer = SandboxServicer(settings, executor, pool, sandbox_metrics)
    binding = ServicerBinding(servicer, sandbox_pb2_grpc.add_SandboxServicer_to_server, "ttc.v1.Sandbox")
    sweeping = asyncio.create_task(sweeper(executor, settings.docker_sweep_seconds, sandbox_metrics))

    async def stop() -> None:
        sweeping.cancel()
        with contextlib.suppress(Exception):
            await remove_own(executor)
        executor.close()

    await serve_grpc(
        [binding],
        metrics=metrics,
        host=settings.host,
        port=settings.port,
        metrics_port=settings.metrics_port,
        on_stop=stop,
    )
