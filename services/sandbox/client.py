"""Typed async client of the sandbox, for the verifier (tests) and orchestrator (program-of-thought).

    async with SandboxClient("127.0.0.1:50053") as sandbox:
        reply = await sandbox.execute("print(6 * 7)")
        reply.outcome.stdout  # b"42\\n"

        reply = await sandbox.execute(prompt + completion, tests=humaneval_tests(problem))
        all(t.passed for t in reply.tests)

Errors arrive as ``grpc.aio.AioRpcError``: INVALID_ARGUMENT (the field is in
``services.common.errors.error_field(err)``) or RESOURCE_EXHAUSTED (queue full; retry later).
A program's own failure is never an RPC error: it is ``reply.outcome.status``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc


def humaneval_tests(problem: Mapping[str, Any]) -> list[sandbox_pb2.TestCase]:
    """One test that runs HumanEval's ``check(entry_point)`` after the program.

    ``problem`` is a HumanEval record (``task_id``, ``test``, ``entry_point``); the program
    sent with it must be the prompt plus the completion, as HumanEval's own harness runs it.
    """
    check = f"{problem['test']}\n\ncheck({problem['entry_point']})\n"
    return [sandbox_pb2.TestCase(name=str(problem["task_id"]), check_code=check)]


def stdout_test(name: str, stdin: bytes, expected_stdout: bytes) -> sandbox_pb2.TestCase:
    """A test that feeds ``stdin`` and compares stdout (line ends and trailing spaces ignored)."""
    return sandbox_pb2.TestCase(name=name, stdin=stdin, expected_stdout=expected_stdout)


class SandboxClient:
    """One channel to the sandbox; open with ``async with`` or call ``close()``."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._channel = insecure_channel(target)
        self._stub = sandbox_pb2_grpc.SandboxStub(self._channel)

    async def execute(
        self,
        code: str,
        *,
        stdin: bytes = b"",
        tests: Iterable[sandbox_pb2.TestCase] = (),
        limits: sandbox_pb2.Limits | None = None,
        files: Iterable[tuple[str, bytes]] | Mapping[str, bytes] = (),
        language: str = "python",
        timeout: float | None = None,
    ) -> sandbox_pb2.ExecuteResponse:
        """Run ``code``; ``timeout`` is the RPC deadline (queueing included), not a sandbox limit."""
        items = files.items() if isinstance(files, Mapping) else files
        request = sandbox_pb2.ExecuteRequest(
            language=language,
            code=code,
            stdin=stdin,
            files=[sandbox_pb2.ExecFile(path=p, content=c) for p, c in items],
            tests=list(tests),
            limits=limits,
        )
        reply: sandbox_pb2.ExecuteResponse = await self._stub.Execute(request, timeout=timeout)
        return reply

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> SandboxClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
