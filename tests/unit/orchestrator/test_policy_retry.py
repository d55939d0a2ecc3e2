"""A policy that restarts is waited for (services/orchestrator/retry.py): real gRPC on 127.0.0.1,
a policy server that is not there yet, or that refuses a stream before or after its first chunk."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import grpc
import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc
from services.orchestrator.clients import GrpcPolicy
from services.orchestrator.retry import BROKEN, REFUSED, Attempts, Backoff, reason_of
from services.search.interfaces import CandidateTextSink, ComponentError, GenerateCall, Generation, Message
from tests.helpers.processes import free_port
from tests.unit.orchestrator.test_clients import FakePolicy

FAST = Backoff(first_s=0.02, cap_s=0.1)


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [Backoff().delay(i) for i in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


class _Err(grpc.aio.AioRpcError):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


async def test_attempts_retry_only_a_policy_going_away_and_stop_before_the_horizon() -> None:
    now = [0.0]
    slept: list[float] = []
    reasons: list[str] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    attempts = Attempts(1.0, Backoff(), reasons.append, clock=lambda: now[0], sleep=sleep)
    refused = _Err(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; Connection refused")
    assert not await attempts.again(_Err(grpc.StatusCode.INVALID_ARGUMENT, "bad"))
    assert not await attempts.again(_Err(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))
    while await attempts.again(refused):
        pass
    # 0.1 + 0.2 + 0.4 = 0.7 s; a 0.8 s wait would end past the 1.0 s horizon.
    assert slept == [0.1, 0.2, 0.4] and attempts.count == 3 and reasons == [REFUSED] * 3
    assert reason_of(_Err(grpc.StatusCode.UNAVAILABLE, "Socket closed")) == BROKEN


def _ask(policy: GrpcPolicy, on_text: CandidateTextSink | None = None) -> Coroutine[Any, Any, Generation]:
    return policy.generate(
        GenerateCall((Message("user", "What is 6*7?"),), n=1, seeds=(1,), max_tokens=8), on_text=on_text
    )


async def _serve(servicer: policy_pb2_grpc.PolicyServicer, port: int) -> grpc.aio.Server:
    server = grpc.aio.server()
    policy_pb2_grpc.add_PolicyServicer_to_server(servicer, server)
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    await server.start()
    return server


async def test_a_call_made_while_the_policy_is_down_is_answered_once_it_is_back() -> None:
    port = free_port()
    reasons: list[str] = []
    fake = FakePolicy()
    async with insecure_channel(f"127.0.0.1:{port}") as channel:
        policy = GrpcPolicy(channel, "qwen", timeout=30, retry_for=30, on_retry=reasons.append, backoff=FAST)
        call = asyncio.ensure_future(_ask(policy))
        await asyncio.sleep(0.5)
        assert not call.done() and reasons and set(reasons) == {REFUSED}
        server = await _serve(fake, port)  # the policy comes back on the same address
        try:
            generation = await asyncio.wait_for(call, 20)
        finally:
            await server.stop(None)
    assert len(generation.candidates) == 1 and len(fake.requests) == 1


async def test_without_retry_for_or_past_it_the_call_fails_unavailable() -> None:
    async with insecure_channel(f"127.0.0.1:{free_port()}") as channel:
        with pytest.raises(ComponentError) as no_wait:
            await _ask(GrpcPolicy(channel, "qwen", timeout=10))
        reasons: list[str] = []
        policy = GrpcPolicy(channel, "qwen", timeout=10, retry_for=0.3, on_retry=reasons.append, backoff=FAST)
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(ComponentError) as waited:
            await _ask(policy)
        assert 0.15 < loop.time() - start < 3 and reasons
    for err in (no_wait, waited):
        assert "UNAVAILABLE" in repr(err.value.__dict__) + str(err.value.args)


class FlakyStream(FakePolicy):
    """GenerateStream refuses ``refuse`` times before its first chunk (UNAVAILABLE, then
    CANCELLED: a server beginning its graceful stop), then, with ``cut``, breaks UNAVAILABLE
    after one chunk."""

    def __init__(self, refuse: int, cut: bool) -> None:
        super().__init__()
        self.refuse, self.cut, self.opened = refuse, cut, 0

    async def GenerateStream(self, request, context) -> AsyncIterator[policy_pb2.GenerateChunk]:  # type: ignore[no-untyped-def]
        self.opened += 1
        if self.opened <= self.refuse:
            code = grpc.StatusCode.UNAVAILABLE if self.opened % 2 else grpc.StatusCode.CANCELLED
            await context.abort(code, "engine restarting")
        yield policy_pb2.GenerateChunk(index=0, text_delta="Forty")
        if self.cut:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "Socket closed")
        yield policy_pb2.GenerateChunk(index=0, text_delta="-two", finish_reason=policy_pb2.FINISH_REASON_STOP)


@pytest.mark.parametrize("cut", [False, True])
async def test_a_stream_is_retried_before_its_first_chunk_and_never_after(cut: bool) -> None:
    port = free_port()
    fake = FlakyStream(refuse=2, cut=cut)
    server = await _serve(fake, port)
    texts: list[str] = []
    reasons: list[str] = []

    async def on_text(index: int, delta: str) -> None:
        texts.append(delta)
        assert index == 0

    try:
        async with insecure_channel(f"127.0.0.1:{port}") as channel:
            policy = GrpcPolicy(channel, "qwen", timeout=10, retry_for=10, on_retry=reasons.append, backoff=FAST)
            if cut:
                with pytest.raises(ComponentError):
                    await _ask(policy, on_text)
            else:
                generation = await _ask(policy, on_text)
                assert generation.candidates[0].text == "Forty-two"
    finally:
        await server.stop(None)
    # Two refusals before any chunk (UNAVAILABLE, CANCELLED) were retried; the cut after "Forty"
    # was not (its text had reached the client: a retry would send it twice).
    assert fake.opened == 3 and len(reasons) == 2
    assert texts == (["Forty"] if cut else ["Forty", "-two"])


class EndlessStream(FakePolicy):
    """GenerateStream sends a chunk every 20 ms until its caller cancels it (then ``cancelled`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = asyncio.Event()

    async def GenerateStream(self, request, context) -> AsyncIterator[policy_pb2.GenerateChunk]:  # type: ignore[no-untyped-def]
        try:
            while True:
                yield policy_pb2.GenerateChunk(index=0, text_delta="1, ", completion_tokens=1)
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_a_search_cancelled_between_reads_cancels_its_stream_at_once() -> None:
    """The worker's deadline cancels the search while it hands a chunk on (here: ``on_text``
    waits), not inside a gRPC read. The call must be cancelled then, not when the garbage
    collector drops it: the traceback kept below holds the call's frames alive, as a job's
    error handling can, so only an explicit cancel frees the engine."""
    port = free_port()
    fake = EndlessStream()
    server = await _serve(fake, port)
    handing_on = asyncio.Event()

    async def on_text(index: int, delta: str) -> None:
        handing_on.set()
        await asyncio.sleep(60)

    try:
        async with insecure_channel(f"127.0.0.1:{port}") as channel:
            task = asyncio.ensure_future(_ask(GrpcPolicy(channel, "qwen", timeout=60), on_text))
            await asyncio.wait_for(handing_on.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as kept:
                await task
            await asyncio.wait_for(fake.cancelled.wait(), 5)
            assert kept.value.__traceback__ is not None
    finally:
        await server.stop(None)
