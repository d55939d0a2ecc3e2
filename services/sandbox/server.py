"""Sandbox server wiring: settings → logging → tracing → interpreter probe → gRPC."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil

from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.logging import configure_logging
from services.common.metrics import ServiceMetrics
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc
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
    tools = (("bwrap", settings.bwrap_path), ("prlimit", settings.prlimit_path), ("setpriv", settings.setpriv_path))
    for name, path in tools:
        if shutil.which(path) is None:
            return None, f"{name} not found at {path!r} (install the Debian packages bubblewrap and util-linux)"
    try:
        return probe_interpreter(settings.python_path), ""
    except (RuntimeError, OSError, ValueError) as exc:
        return None, str(exc)


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
    executor = Executor(settings, interpreter, on_kill=sandbox_metrics.killed, unavailable=problem)
    uid_base: int | None = settings.uid_base
    if os.geteuid() != 0:
        log.warning("not root: executions run as this user, so RLIMIT_NPROC counts all of its processes")
        uid_base = None
    pool = ExecutionPool(settings.max_concurrency, settings.max_queue, uid_base, sandbox_metrics.pool_changed)
    await self_check(executor, settings, uid_base)
    servicer = SandboxServicer(settings, executor, pool, sandbox_metrics)
    binding = ServicerBinding(servicer, sandbox_pb2_grpc.add_SandboxServicer_to_server, "ttc.v1.Sandbox")
    await serve_grpc(
        [binding], metrics=metrics, host=settings.host, port=settings.port, metrics_port=settings.metrics_port
    )


def main() -> None:
    common = CommonSettings()
    settings = SandboxSettings()
    configure_logging("sandbox", common.log_level, common.log_json)
    configure_tracing("sandbox", common.otel_endpoint, common.otel_console)
    asyncio.run(serve(settings, common))
