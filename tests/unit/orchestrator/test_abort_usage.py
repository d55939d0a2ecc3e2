"""Tokens decoded for a call that a cancel or the deadline cut off reach the job's usage.

- ``GrpcPolicy(stream_always=True)`` (the worker's) sends a call that hands no text on through
  GenerateStream too, so a cut-off call still says what it had been sent (a unary call's reply
  never comes), also a call that wants logprobs (the chunks carry them). Its stream fails over to the next
  replica before its first chunk, as a unary call does.
- The worker's meter (services/orchestrator/metering.py) charges what the search's budget
  charges, so it equals ``budget_used`` for a finished search and still knows the spend of a
  cancelled one, whose search reports nothing.

Real gRPC on 127.0.0.1 against an in-process policy (``StallingPolicy``: a few counted chunks,
then a stall).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, policy_pb2
from services.orchestrator.clients import USAGE_CHUNK_INTERVAL_MS, GrpcPolicy
from services.orchestrator.metering import Meter, MeteredExecutor, MeteredPolicy, MeteredVerifier
from services.search.interfaces import GenerateCall, Generation, Message, ProgramRun
from services.search.run import run_search
from tests.helpers.processes import free_port
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains
from tests.helpers.search_jobs import make_job
from tests.unit.orchestrator.policy_server import serving
from tests.unit.orchestrator.test_partial_usage import SENT, StallingPolicy, _chunks_sent, served

__all__ = ["served"]  # the in-process policy fixture


class FinishingPolicy(StallingPolicy):
    """A stream that finishes: ``SENT`` counted chunks, the finish, then the usage chunk."""

    async def GenerateStream(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        for count in range(1, SENT + 1):
            yield policy_pb2.GenerateChunk(index=0, text_delta=f" w{count}", completion_tokens=count)
        yield policy_pb2.GenerateChunk(index=0, finish_reason=policy_pb2.FINISH_REASON_STOP, completion_tokens=SENT)
        yield policy_pb2.GenerateChunk(usage=common_pb2.Usage(prompt_tokens=5, completion_tokens=SENT))


@pytest.fixture
async def finishing() -> AsyncIterator[tuple[FinishingPolicy, str]]:
    fake = FinishingPolicy()
    async with serving(fake) as target:
        yield fake, target


def _call(**kw: object) -> GenerateCall:
    return GenerateCall((Message("user", "count"),), n=1, seeds=(1,), max_tokens=100, **kw)  # type: ignore[arg-type]


async def test_a_call_without_a_text_sink_streams_and_a_cancel_hands_over_its_tokens(
    served: tuple[StallingPolicy, str],
) -> None:
    fake, target = served
    partial: list[Generation] = []
    async with insecure_channel(target) as channel:
        policy = GrpcPolicy(channel, stream_always=True)
        call = asyncio.ensure_future(policy.generate(_call(), on_partial=partial.append))
        await _chunks_sent(fake)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    [got] = partial
    assert [c.completion_tokens for c in got.candidates] == [SENT]


async def test_without_stream_always_the_call_is_unary(served: tuple[StallingPolicy, str]) -> None:
    fake, target = served
    async with insecure_channel(target) as channel:
        # StallingPolicy's Generate answers at once; its stream would stall for an hour.
        plain = await asyncio.wait_for(GrpcPolicy(channel).generate(_call(logprobs=True)), 10)
    assert plain.candidates[0].text == "ok"
    assert len(fake.requests) == 1


async def test_a_call_that_wants_logprobs_streams_too_and_a_cancel_hands_over_its_tokens(
    served: tuple[StallingPolicy, str],
) -> None:
    fake, target = served
    partial: list[Generation] = []
    async with insecure_channel(target) as channel:
        call = asyncio.ensure_future(
            GrpcPolicy(channel, stream_always=True).generate(_call(logprobs=True), on_partial=partial.append)
        )
        await _chunks_sent(fake)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    [request] = fake.requests
    assert request.sampling.logprobs
    [got] = partial
    assert [c.completion_tokens for c in got.candidates] == [SENT]


async def test_a_stream_fails_over_to_the_next_replica_before_its_first_chunk(
    finishing: tuple[FinishingPolicy, str],
) -> None:
    fake, target = finishing
    dead = insecure_channel(f"127.0.0.1:{free_port()}")  # nothing listens there: UNAVAILABLE
    live = insecure_channel(target)
    try:
        policy = GrpcPolicy([dead, live], stream_always=True, timeout=10)
        first = await policy.generate(_call())
        second = await policy.generate(_call())
    finally:
        await dead.close()
        await live.close()
    assert len(fake.requests) == 2  # both calls reached the live replica
    assert [c.completion_tokens for c in first.candidates] == [SENT] == [c.completion_tokens for c in second.candidates]
    assert first.prompt_tokens == 5 and first.candidates[0].finish_reason == "stop"


class _Runs:
    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        del code, wall_seconds
        return ProgramRun(status="ok", stdout="42\n", stderr="", exit_code=0, wall_seconds=0.25, cpu_seconds=0.1)


@pytest.mark.parametrize("strategy", ["self_consistency", "best_of_n", "program_of_thought"])
async def test_the_meter_charges_what_the_searchs_budget_charges(strategy: str) -> None:
    job = make_job(strategy)
    meter = Meter()
    policy = MeteredPolicy(ScriptedPolicy(answers_by_seed(["42", "41"])), meter)
    verifier = MeteredVerifier(ScriptedVerifier(contains("42")), meter)
    result, _ = await run_search(job, policy, verifier, executor=MeteredExecutor(_Runs(), meter))
    used, metered = result.budget_used, meter.usage()
    assert used.generated_tokens > 0
    for name in (
        "generated_tokens",
        "prompt_tokens",
        "cached_tokens",
        "policy_calls",
        "verifier_calls",
        "verifier_prompt_tokens",
        "verifier_generated_tokens",
        "sandbox_runs",
        "sandbox_seconds",
    ):
        assert getattr(metered, name) == getattr(used, name), name


async def test_a_cancelled_search_still_has_its_spend_in_the_meter(served: tuple[StallingPolicy, str]) -> None:
    """What the worker records for a cancelled job: the stream's tokens as far as they came."""
    fake, target = served
    meter = Meter()
    async with insecure_channel(target) as channel:
        policy = MeteredPolicy(GrpcPolicy(channel, stream_always=True), meter)
        job = make_job("best_of_n", n=2)  # no logprobs asked (a vote's tie-break asks them: unary)
        job.quiet = True  # no text sink: the calls are streamed for the count alone
        search = asyncio.ensure_future(run_search(job, policy, ScriptedVerifier(contains("42"))))
        while len(fake.requests) < 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        search.cancel()
        with pytest.raises(asyncio.CancelledError):
            await search
    metered = meter.usage()
    assert metered.generated_tokens == SENT * len(fake.requests)
    assert metered.policy_calls == len(fake.requests)
    assert isinstance(metered, orchestrator_pb2.BudgetUse)


async def test_a_call_streamed_only_for_its_count_asks_for_coarse_chunks(
    finishing: tuple[FinishingPolicy, str],
) -> None:
    """Per-token chunks cost the engine decode time; only a caller that shows the text needs them."""
    fake, target = finishing
    shown: list[str] = []

    async def show(index: int, text: str) -> None:
        shown.append(text)

    async with insecure_channel(target) as channel:
        policy = GrpcPolicy(channel, stream_always=True)
        counted_only = await policy.generate(_call())
        streamed = await policy.generate(_call(), on_text=show)
    assert [r.chunk_interval_ms for r in fake.requests] == [USAGE_CHUNK_INTERVAL_MS, 0]
    assert counted_only.candidates[0].text == streamed.candidates[0].text == "".join(shown)
