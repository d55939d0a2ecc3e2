"""``Sandbox.Execute``: validate, wait for a slot, run the program and its tests, report.

A request holds one slot for all its runs (program, then each test in order), so a request
with many tests cannot crowd out others by grabbing several slots.
"""

from __future__ import annotations

import logging
import time

import grpc

from services.common.errors import ResourceExhausted
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc
from services.sandbox.backend import Runner
from services.sandbox.executor import Program
from services.sandbox.limits import ExecLimits, resolve_limits
from services.sandbox.metrics import SandboxMetrics
from services.sandbox.pool import ExecutionPool
from services.sandbox.settings import SandboxSettings
from services.sandbox.validation import check_file_path, validate_request

log = logging.getLogger(__name__)
OK = sandbox_pb2.EXEC_STATUS_OK


def stdout_matches(actual: bytes, expected: bytes) -> bool:
    """Equal up to line endings and trailing whitespace at line ends and at the end."""

    def norm(data: bytes) -> list[bytes]:
        return [line.rstrip() for line in data.replace(b"\r\n", b"\n").rstrip().split(b"\n")]

    return norm(actual) == norm(expected)


def program_with_check(code: str, check_code: str) -> bytes:
    """The program followed by the test's check code, run as one file (HumanEval style)."""
    if not check_code.strip():
        return code.encode("utf-8", "surrogatepass")
    return f"{code}\n\n{check_code}\n".encode("utf-8", "surrogatepass")


class SandboxServicer(sandbox_pb2_grpc.SandboxServicer):
    """Serves ``Execute`` over a backend (``Runner``) and an ``ExecutionPool``."""

    def __init__(
        self, settings: SandboxSettings, executor: Runner, pool: ExecutionPool, metrics: SandboxMetrics
    ) -> None:
        self.settings = settings
        self.executor = executor
        self.pool = pool
        self.metrics = metrics

    async def _run(self, program: Program, limits: ExecLimits, uid: int | None) -> tuple[sandbox_pb2.RunOutcome, str]:
        outcome, message = await self.executor.run(program, limits, uid)
        status = sandbox_pb2.ExecStatus.Name(outcome.status).removeprefix("EXEC_STATUS_").lower()
        self.metrics.observe_run(status, outcome.wall_seconds, outcome.cpu_seconds)
        return outcome, message

    async def Execute(
        self, request: sandbox_pb2.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> sandbox_pb2.ExecuteResponse:
        validate_request(request, self.settings)
        limits = resolve_limits(request.limits if request.HasField("limits") else None, self.settings)
        files = [(check_file_path(f.path, f"files[{i}].path"), f.content) for i, f in enumerate(request.files)]
        queued = time.perf_counter()
        try:
            async with self.pool.slot() as uid:
                self.metrics.queue_wait.labels(self.metrics.service).observe(time.perf_counter() - queued)
                return await self._execute(request, limits, files, uid)
        except ResourceExhausted:
            self.metrics.rejected.labels(self.metrics.service).inc()
            raise

    async def _execute(
        self,
        request: sandbox_pb2.ExecuteRequest,
        limits: ExecLimits,
        files: list[tuple[str, bytes]],
        uid: int | None,
    ) -> sandbox_pb2.ExecuteResponse:
        code = request.code
        outcome, message = await self._run(
            Program(code.encode("utf-8", "surrogatepass"), request.stdin, files), limits, uid
        )
        response = sandbox_pb2.ExecuteResponse(outcome=outcome, message=message)
        if not request.tests:
            return response
        first_bad = OK
        for i, test in enumerate(request.tests):
            program = Program(program_with_check(code, test.check_code), test.stdin, files)
            test_outcome, test_message = await self._run(program, limits, uid)
            passed = test_outcome.status == OK and test_outcome.exit_code == 0
            if passed and test.HasField("expected_stdout"):
                passed = stdout_matches(test_outcome.stdout, test.expected_stdout)
            response.tests.add(name=test.name or f"test_{i}", passed=passed, outcome=test_outcome)
            if first_bad == OK and test_outcome.status != OK:
                first_bad = test_outcome.status
                response.message = f"{test.name or f'test_{i}'}: {test_message}"
        response.outcome.status = first_bad
        if first_bad == OK:
            response.message = ""
        return response
