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


def memory_cgroups(settings: SandboxSettings, uids: list[int]) -> dict[int, SlotCgroup]:
    """Per-slot memory cgroups, or none (logged: the rlimits then bound each process only)."""
    if settings.memory_cgroup == "off" or not uids:
        log.warning("memory cgroups off: memory is bounded per process (RLIMIT_AS), not per execution")
        return {}
    found = detect_parent() if settings.memory_cgroup == "auto" else (Path(settings.memory_cgroup), 1)
    if found is None:
        log.warning("no memory cgroup mounted: memory is bounded per process (RLIMIT_AS), not per execution")
        return {}
    parent, version = found
    if settings.memory_cgroup != "auto" and (parent / "cgroup.controllers").exists():
        version = 2
    try:
        slots = create_slots(parent, version, uids)
        for slot in slots.values():
            slot.set_limit(settings.default_memory_bytes + 2 * settings.tmpfs_bytes)
    except OSError as exc:
        log.warning("cannot create memory cgroups under %s (%s): memory is bounded per process only", parent, exc)
        return {}
    log.info("memory cgroups per slot", extra={"parent": str(parent), "cgroup_version": version})
    return slots


async def self_check(executor: Executor, settings: SandboxSettings, uid: int | None) -> None:
    """Run one trivial program so a sandbox that cannot start says so at start-up, loudly."""
    outcome, message = await executor.run(Program(b"print('ok')"), resolve_limits(None, settings), uid)
    if outcome.status != sandbox_pb2.EXEC_STATUS_OK or outcome.stdout != b"ok\n":
        log.error(
            "sandbox self-check failed; executions will report SANDBOX_ERROR until this is fixed: %s %s",
            sandbox_pb2.ExecStatus.Name(outcome.status),
            message or outcome.stderr.decode(errors="replace")[-500:],
        )
    else:
        log.info("sandbox self-check passed", extra={"wall_seconds": round(outcome.wall_seconds, 3)})


async def serve(settings: SandboxSettings, common: CommonSettings) -> None:
    metrics = ServiceMetrics("sandbox")
    sandbox_metrics = SandboxMetrics(metrics)
    interpreter, problem = find_problem(settings)
    if problem:
        log.error("sandbox unavailable, every execution will report SANDBOX_ERROR: %s", problem)
    uid_base: int | None = settings.uid_base
    if os.geteuid() != 0:
        log.warning("not root: executions run as this user, so RLIMIT_NPROC counts all of its processes")
        uid_base = None
    uids = [] if uid_base is None else [uid_base + i for i in range(settings.max_concurrency)]
    cgroups = memory_cgroups(settings, uids)
    executor = Executor(settings, interpreter, on_kill=sandbox_metrics.killed, unavailable=problem, cgroups=cgroups)
    pool = ExecutionPool(settings.max_concurrency, settings.max_queue, uid_base, sandbox_metrics.pool_changed)
    await self_check(executor, settings, uid_base)
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
    asyncio.run(serve(settings, common))
