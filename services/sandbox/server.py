"""Sandbox server wiring: settings → logging → tracing → interpreter probe → gRPC."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path

from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.logging import configure_logging
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc
from services.sandbox.cgroups import SlotCgroup, create_slots, detect_parent
from services.sandbox.docker_backend import DockerUnavailable, serve_docker
from services.sandbox.executor import Executor, Program
from services.sandbox.isolation import Interpreter, probe_interpreter
from services.sandbox.limits import resolve_limits
from services.sandbox.metrics import SandboxMetrics
from services.sandbox.pool import ExecutionPool
from services.sandbox.servicer import SandboxServicer
from services.sandbox.settings import SandboxSettings

log = logging.getLogger("services.sandbox")


def find_problem(settings: SandboxSettings) -> tuple[Interpreter | None, str]:
    """The interpreter's view, or why the sandbox cannot run at all (missing binaries, bad interpreter)."""
    tools = [("bwrap", settings.bwrap_path), ("prlimit", settings.prlimit_path)]
    if os.geteuid() == 0:  # only root switches to slot uids
        tools.append(("setpriv", settings.setpriv_path))
    for name, path in tools:
        if shutil.which(path) is None:
            return None, f"{name} not found at {path!r} (install the Debian packages bubblewrap and util-linux)"
    try:
        return probe_interpreter(settings.python_path, site_packages=settings.site_packages), ""
    except (RuntimeError, OSError, ValueError) as exc:
        return None, str(exc)


class SandboxStartError(RuntimeError):
    """The sandbox cannot give the isolation its settings promise; the service must not start."""


def memory_cgroups(settings: SandboxSettings, slots: list[int]) -> dict[int, SlotCgroup]:
    """Per-slot memory cgroups; ``{}`` only when the settings say ``off``.

    ``auto`` never degrades silently: where this process may not create memory cgroups (no
    controller mounted, or not root and nothing delegated), the service refuses to start and
    says how to fix it or how to accept per-process limits explicitly.
    """
    if settings.memory_cgroup == "off":
        log.warning("memory cgroups off (TTC_SANDBOX_MEMORY_CGROUP=off): memory is bounded per process (RLIMIT_AS)")
        return {}
    found = detect_parent() if settings.memory_cgroup == "auto" else (Path(settings.memory_cgroup), 1)
    remedy = (
        "delegate a memory cgroup to the service (TTC_SANDBOX_MEMORY_CGROUP=<its directory>) or set "
        "TTC_SANDBOX_MEMORY_CGROUP=off to bound memory per process only"
    )
    if found is None:
        raise SandboxStartError(f"no memory cgroup controller is mounted for this process: {remedy}")
    parent, version = found
    if settings.memory_cgroup != "auto" and (parent / "cgroup.controllers").exists():
        version = 2
    try:
        cgroups = create_slots(parent, version, slots)
        for cgroup in cgroups.values():
            cgroup.set_limit(settings.default_memory_bytes + 2 * settings.tmpfs_bytes)
    except OSError as exc:
        who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
        raise SandboxStartError(f"cannot create memory cgroups under {parent} as {who} ({exc}): {remedy}") from exc
    log.info("memory cgroups per slot", extra={"parent": str(parent), "cgroup_version": version})
    return cgroups


async def self_check(executor: Executor, settings: SandboxSettings, slot: int) -> None:
    """Run one trivial program; a sandbox that cannot run it refuses to start, saying why."""
    outcome, message = await executor.run(Program(b"print('ok')"), resolve_limits(None, settings), slot)
    if outcome.status != sandbox_pb2.EXEC_STATUS_OK or outcome.stdout != b"ok\n":
        detail = message or outcome.stderr.decode(errors="replace")[-500:]
        hint = "" if os.geteuid() == 0 else " (not root: bubblewrap needs unprivileged user namespaces)"
        raise SandboxStartError(
            f"sandbox self-check failed{hint}: {sandbox_pb2.ExecStatus.Name(outcome.status)} {detail}"
        )
    log.info("sandbox self-check passed", extra={"wall_seconds": round(outcome.wall_seconds, 3)})


async def serve(settings: SandboxSettings, common: CommonSettings) -> None:
    metrics = ServiceMetrics("sandbox")
    sandbox_metrics = SandboxMetrics(metrics)
    if settings.backend == "docker":  # never falls back to bubblewrap: a broken runtime stops the service
        await serve_docker(settings, metrics, sandbox_metrics)
        return
    interpreter, problem = find_problem(settings)
    if problem:
        raise SandboxStartError(f"sandbox unavailable: {problem}")
    # Slot i is uid_base+i: the host uid its programs run as when the service is root, and the
    # name of its memory cgroup either way. Not root, every execution runs as this user in its
    # own user and PID namespaces (rootless bubblewrap): RLIMIT_NPROC is set inside the new
    # user namespace, so it still counts one execution's processes (isolation.program_argv).
    slots = [settings.uid_base + i for i in range(settings.max_concurrency)]
    if os.geteuid() != 0:
        log.info("not root: rootless bubblewrap, executions run as uid %d in their own namespaces", os.geteuid())
    cgroups = memory_cgroups(settings, slots)
    executor = Executor(settings, interpreter, on_kill=sandbox_metrics.killed, cgroups=cgroups)
    pool = ExecutionPool(settings.max_concurrency, settings.max_queue, settings.uid_base, sandbox_metrics.pool_changed)
    try:
        await self_check(executor, settings, slots[0])
    except SandboxStartError:
        for cgroup in cgroups.values():
            cgroup.remove()
        raise
    servicer = SandboxServicer(settings, executor, pool, sandbox_metrics)
    binding = ServicerBinding(servicer, sandbox_pb2_grpc.add_SandboxServicer_to_server, "ttc.v1.Sandbox")

    async def remove_cgroups() -> None:
        for slot in cgroups.values():
            slot.remove()

    await serve_grpc(
        [binding],
        metrics=metrics,
        host=settings.host,
        port=settings.port,
        metrics_port=settings.metrics_port,
        on_stop=remove_cgroups,
    )


def main() -> None:
    common = CommonSettings()
    settings = SandboxSettings()
    configure_logging("sandbox", common.log_level, common.log_json)
    configure_tracing("sandbox", common.otel_endpoint, common.otel_console)
    try:
        asyncio.run(serve(settings, common))
    except (SandboxStartError, DockerUnavailable) as exc:
        log.critical("sandbox refuses to start: %s", exc)
        raise SystemExit(2) from exc
