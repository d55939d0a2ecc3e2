"""The one typed async client of the sandbox service: for the verifier (code tests), the
orchestrator (program-of-thought), the benchmarks and the tests.

    async with SandboxClient("127.0.0.1:50053") as sandbox:
        reply = await sandbox.execute("print(6 * 7)")
        reply.outcome.stdout  # b"42\\n"

        reply = await sandbox.execute(prompt + completion, tests=humaneval_tests(problem))
        all(t.passed for t in reply.tests)

Errors arrive as ``grpc.aio.AioRpcError``: INVALID_ARGUMENT (the field is in
``services.common.errors.error_field(err)``) or RESOURCE_EXHAUSTED (queue full; retry later, or
let the client wait: ``queue_full_backoff_s``). A program's own failure is never an RPC error:
it is ``reply.outcome.status``. What an error means to the caller (an outage, the request's
fault, a per-candidate infrastructure error) is the caller's to sort: this client only builds
the request and carries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc

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
    """One channel to the sandbox; open with ``async with`` or call ``close()``.

    ``SandboxClient(target)`` opens and owns its channel; ``SandboxClient(target, channel=...)``
    runs on a channel the caller owns (a worker's shared, context-propagating one), which
    ``close()`` leaves open (``target`` then only names it in messages).
    ``queue_full_backoff_s``: the waits between retries while the sandbox's queue is full
    (RESOURCE_EXHAUSTED); empty (the default) hands that status straight to the caller.
    """

    def __init__(
        self,
        target: str,
        *,
        channel: grpc.aio.Channel | None = None,
        queue_full_backoff_s: Sequence[float] = (),
    ) -> None:
        self.target = target
        self.queue_full_backoff_s = tuple(queue_full_backoff_s)
        self._owned = channel is None
        self._channel = insecure_channel(target) if channel is None else channel
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
        request_id: str = "",
        timeout: float | None = None,
    ) -> sandbox_pb2.ExecuteResponse:
        """Run ``code``; ``timeout`` is each attempt's RPC deadline (queueing included), not a
        sandbox limit; ``request_id`` names the run in the sandbox's logs."""
        items = files.items() if isinstance(files, Mapping) else files
        request = sandbox_pb2.ExecuteRequest(
            language=language,
            code=code,
            stdin=stdin,
            files=[sandbox_pb2.ExecFile(path=p, content=c) for p, c in items],
            tests=list(tests),
            limits=limits,
            request_id=request_id,
        )
        for delay in (*self.queue_full_backoff_s, None):
            try:
                reply: sandbox_pb2.ExecuteResponse = await self._stub.Execute(request, timeout=timeout)
                return reply
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or delay is None:
                    raise
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # the last delay is None: its failure is raised above

    async def close(self) -> None:
        if self._owned:
            await self._channel.close()

    async def __aenter__(self) -> SandboxClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
