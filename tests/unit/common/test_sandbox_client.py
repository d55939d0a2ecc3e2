"""The one sandbox client: the request it builds, its wait on a full queue, and whose channel it closes.

A small in-process gRPC ``Sandbox`` servicer stands in for the sandbox service here: what is
under test is the client's side of the wire (the sandbox itself is tested in
``tests/unit/sandbox`` and end to end in ``tests/e2e/test_sandbox_*.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from services.common.grpc_client import insecure_channel
from services.common.sandbox_client import SandboxClient, humaneval_tests, stdout_test
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc


class QueueFullThenRun(sandbox_pb2_grpc.SandboxServicer):
    """Refuses the first ``refusals`` calls as a full queue would, then echoes the code's length."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.requests: list[sandbox_pb2.ExecuteRequest] = []

    async def Execute(self, request: sandbox_pb2.ExecuteRequest, context: Any) -> sandbox_pb2.ExecuteResponse:
        self.requests.append(request)
        if len(self.requests) <= self.refusals:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "queue full")
        return sandbox_pb2.ExecuteResponse(
            outcome=sandbox_pb2.RunOutcome(status=sandbox_pb2.EXEC_STATUS_OK, stdout=str(len(request.code)).encode())
        )


@pytest.fixture
async def sandbox() -> AsyncIterator[tuple[str, QueueFullThenRun]]:
    servicer = QueueFullThenRun(refusals=2)
    server = grpc.aio.server()
    sandbox_pb2_grpc.add_SandboxServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", servicer
    await server.stop(0)


async def test_a_full_queue_is_waited_out_with_backoff_and_the_request_is_built_once(
    sandbox: tuple[str, QueueFullThenRun],
) -> None:
    target, servicer = sandbox
    tests = [stdout_test("t", b"1", b"1"), *humaneval_tests({"task_id": "h/0", "test": "pass", "entry_point": "f"})]
    async with SandboxClient(target, queue_full_backoff_s=(0.01, 0.01)) as client:
        reply = await client.execute(
            "print(1)",
            stdin=b"x",
            tests=tests,
            limits=sandbox_pb2.Limits(wall_seconds=2),
            files={"a.txt": b"A"},
            request_id="job-1",
            timeout=5,
        )
    assert reply.outcome.stdout == b"8"
    assert len(servicer.requests) == 3 and all(r == servicer.requests[0] for r in servicer.requests)
    sent = servicer.requests[0]
    assert (sent.language, sent.code, sent.stdin, sent.request_id) == ("python", "print(1)", b"x", "job-1")
    assert sent.limits.wall_seconds == 2 and [(f.path, f.content) for f in sent.files] == [("a.txt", b"A")]
    assert [t.name for t in sent.tests] == ["t", "h/0"] and sent.tests[1].check_code.endswith("check(f)\n")


async def test_without_backoff_or_with_too_few_waits_a_full_queue_reaches_the_caller(
    sandbox: tuple[str, QueueFullThenRun],
) -> None:
    target, servicer = sandbox
    async with SandboxClient(target) as client:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.execute("print(1)")
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and len(servicer.requests) == 1
    servicer.requests.clear()
    async with SandboxClient(target, queue_full_backoff_s=(0.01,)) as client:
        with pytest.raises(grpc.aio.AioRpcError):
            await client.execute("print(1)")
    assert len(servicer.requests) == 2


async def test_a_callers_channel_stays_open_after_close(sandbox: tuple[str, QueueFullThenRun]) -> None:
    target, servicer = sandbox
    servicer.refusals = 0
    channel = insecure_channel(target)
    try:
        async with SandboxClient(target, channel=channel) as client:
            await client.execute("a")
        again = SandboxClient(target, channel=channel)
        assert (await again.execute("abc")).outcome.stdout == b"3"  # the channel still serves
    finally:
        await channel.close()
